//! tether's own HTTP/1 engine (`http1: engine`, the default) over real sockets: what it
//! serves itself (counted as `engine`), what it hands to pingora-proxy (counted as
//! `handover`), and what the server and the client see either way: the head tether sends,
//! kept server connections, pipelined requests, chunked and close-delimited answers, HTTP/1.0
//! clients, and the framing it refuses. The rest of the suite runs on the engine (the
//! default) and again on pingora-proxy with `TETHER_HTTP1=proxy`.

mod common;

use common::recording::{read_all, read_request};
use common::{engine_requests as count, scrape, Opts, Tether};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// What the scripted server saw: each request's head and body, and the connection it came
/// on (numbered from 1).
#[derive(Default)]
struct Seen {
    requests: Mutex<Vec<(usize, String, Vec<u8>)>>,
    connections: AtomicUsize,
}

/// A server whose answer depends on the path: `/chunked` (a chunked body), `/close` (a
/// body ended by the close), `/head` (a `Content-Length` and no body, for HEAD), `/slow`
/// (after 3 s), anything else `200` with `conn <n> got <len> bytes`. It reads `Content-Length` and chunked bodies.
async fn scripted_server() -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let n = log.connections.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::spawn(serve(s, n, log.clone()));
        }
    });
    (addr, seen)
}

async fn serve(mut s: TcpStream, conn: usize, seen: Arc<Seen>) {
    let mut buf = Vec::new();
    loop {
        let Some((head, body)) = read_request(&mut s, &mut buf).await else {
            return;
        };
        let path = head.split(' ').nth(1).unwrap_or("").to_string();
        let len = body.len();
        seen.requests.lock().unwrap().push((conn, head, body));
        if path == "/slow" {
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        let answer = match path.as_str() {
            "/chunked" => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=1\r\n world\r\n0\r\nX-T: 1\r\n\r\n".to_string(),
            "/close" => "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the close".to_string(),
            "/head" => "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n".to_string(),
            _ => {
                let text = format!("conn {conn} got {len} bytes");
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nKeep-Alive: timeout=5\r\n\r\n{text}", text.len())
            }
        };
        if s.write_all(answer.as_bytes()).await.is_err() || path == "/close" {
            return;
        }
    }
}

fn start(server: SocketAddr, extra: &str) -> Tether {
    Tether::start_with(Opts {
        cluster: format!("    servers:\n      - {{ name: s1, address: \"{server}\" }}\n"),
        listener_extra: format!("    http1: engine\n{extra}"),
        metrics: true,
        ..Opts::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_served_by_the_engine_on_one_kept_server_connection() {
    let (server, seen) = scripted_server().await;
    let t = start(server, "");
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    // Three requests in one write, the client's hop fields and `$WS*` among them.
    s.write_all(b"GET /a HTTP/1.1\r\nHost: shop\r\nConnection: keep-alive\r\nKeep-Alive: timeout=9\r\nProxy-Authorization: Basic eDp5\r\n$WSFO: true\r\nX-Forwarded-For: 192.0.2.7\r\nX-Case-Kept: 1\r\n\r\nPOST /b HTTP/1.1\r\nHost: shop\r\nContent-Length: 5, 5\r\n\r\nhelloGET /c HTTP/1.1\r\nHost: shop\r\n\r\n")
        .await
        .unwrap();
    let (text, closed) = read_all(&mut s, Duration::from_millis(500)).await;
    assert!(!closed, "the connection stays open");
    let bodies: Vec<&str> = text
        .split("\r\n\r\n")
        .skip(1)
        .map(|b| &b[..b.find("HTTP/").unwrap_or(b.len())])
        .collect();
    assert_eq!(
        bodies,
        [
            "conn 1 got 0 bytes",
            "conn 1 got 5 bytes",
            "conn 1 got 0 bytes"
        ],
        "{text}"
    );
    assert!(
        !text.contains("Keep-Alive: timeout=5"),
        "the server's hop fields stay with it: {text}"
    );
    let requests = seen.requests.lock().unwrap().clone();
    let a = &requests[0].1;
    assert!(
        a.starts_with("GET /a HTTP/1.1\r\nHost: shop\r\nX-Case-Kept: 1\r\n"),
        "order and case kept: {a}"
    );
    for gone in [
        "Keep-Alive: timeout",
        "Proxy-Authorization",
        "Connection:",
        "$WSFO",
    ] {
        assert!(!a.contains(gone), "{gone} reached the server: {a}");
    }
    assert!(
        a.contains("X-Forwarded-For: 192.0.2.7, 127.0.0.1\r\n"),
        "{a}"
    );
    assert!(
        a.contains("X-Forwarded-Proto: http\r\n") && a.contains("X-Forwarded-Host: shop\r\n"),
        "{a}"
    );
    assert!(
        requests[1].1.contains("Content-Length: 5\r\n"),
        "one length: {}",
        requests[1].1
    );
    assert_eq!(requests[1].2, b"hello");
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        1,
        "one server connection for all three"
    );
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!((count(&m, "engine"), count(&m, "handover")), (3, 0), "{m}");
    t.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_close_delimited_and_head_answers_reach_the_client_whole() {
    let (server, _seen) = scripted_server().await;
    let t = start(server, "");
    // A chunked answer goes as it came, and the connection goes on.
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(b"GET /chunked HTTP/1.1\r\nHost: shop\r\n\r\nHEAD /head HTTP/1.1\r\nHost: shop\r\n\r\nGET /close HTTP/1.1\r\nHost: shop\r\n\r\n")
        .await
        .unwrap();
    let (text, closed) = read_all(&mut s, Duration::from_secs(2)).await;
    assert!(
        closed,
        "a close-delimited answer closes the client's connection too: {text}"
    );
    let parts: Vec<&str> = text.split("HTTP/1.1 ").skip(1).collect();
    assert_eq!(parts.len(), 3, "{text}");
    assert!(parts[0].contains("Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=1\r\n world\r\n0\r\nX-T: 1\r\n\r\n"), "{}", parts[0]);
    assert!(
        parts[1].starts_with("200 OK\r\nContent-Length: 11\r\n\r\n")
            && parts[1].ends_with("\r\n\r\n"),
        "{}",
        parts[1]
    );
    assert!(
        parts[2].contains("Connection: close\r\n") && parts[2].ends_with("\r\n\r\nuntil the close"),
        "{}",
        parts[2]
    );
    // To an HTTP/1.0 client, a chunked answer comes without its coding.
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(b"GET /chunked HTTP/1.0\r\nHost: shop\r\nConnection: keep-alive\r\n\r\n")
        .await
        .unwrap();
    let (text, closed) = read_all(&mut s, Duration::from_secs(2)).await;
    assert!(closed, "{text}");
    assert!(
        !text.to_ascii_lowercase().contains("transfer-encoding"),
        "{text}"
    );
    assert!(text.ends_with("\r\n\r\nhello world"), "{text}");
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!((count(&m, "engine"), count(&m, "handover")), (4, 0), "{m}");
    t.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_engine_does_not_take_is_handed_over_with_the_bytes_it_read() {
    let (server, seen) = scripted_server().await;
    let t = start(server, "");
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    // One served by the engine, then one with the asterisk-form target (handed over) and
    // one more after it.
    s.write_all(b"GET /1 HTTP/1.1\r\nHost: shop\r\n\r\nOPTIONS * HTTP/1.1\r\nHost: shop\r\nContent-Length: 5\r\n\r\nworldGET /3 HTTP/1.1\r\nHost: shop\r\n\r\n")
        .await
        .unwrap();
    let (text, _) = read_all(&mut s, Duration::from_millis(500)).await;
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 3, "{text}");
    let requests = seen.requests.lock().unwrap().clone();
    let paths: Vec<_> = requests
        .iter()
        .map(|r| r.1.split(' ').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(paths, ["/1", "*", "/3"]);
    assert_eq!(requests[1].2, b"world");
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!((count(&m, "engine"), count(&m, "handover")), (1, 1), "{m}");
    t.terminate();
}

/// A `redirect_https` listener's answers are the engine's own, on a kept connection: the
/// same host and target over https, and a host that cannot go into a `Location` refused
/// (400, the connection closed), as pingora-proxy's path answers; the server sees nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_https_is_the_engines_own_answer() {
    let (server, seen) = scripted_server().await;
    let t = start(server, "    redirect_https: { port: 8443 }\n");
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(b"GET /a/b?c=1 HTTP/1.1\r\nHost: shop.example:8080\r\n\r\nPOST / HTTP/1.1\r\nHost: [::1]\r\nContent-Length: 2\r\n\r\nokGET /x HTTP/1.1\r\nHost: shop_1\r\n\r\nGET /never HTTP/1.1\r\nHost: shop\r\n\r\n")
        .await
        .unwrap();
    let (text, closed) = read_all(&mut s, Duration::from_secs(2)).await;
    let answers: Vec<_> = text.split("HTTP/1.1 ").skip(1).collect();
    assert_eq!(answers.len(), 3, "{text}");
    assert!(
        answers[0].starts_with("308 Permanent Redirect\r\n"),
        "{text}"
    );
    assert!(answers[0].contains("\r\nLocation: https://shop.example:8443/a/b?c=1\r\n"));
    assert!(
        answers[1].contains("\r\nLocation: https://[::1]:8443/\r\n"),
        "{text}"
    );
    assert!(!answers[1].contains("Connection: close"), "{text}");
    assert!(answers[2].starts_with("400 Bad Request\r\n"), "{text}");
    assert!(answers[2].contains("Connection: close\r\n"), "{text}");
    assert!(closed, "the connection closes after the 400: {text}");
    assert!(seen.requests.lock().unwrap().is_empty());
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!((count(&m, "engine"), count(&m, "handover")), (3, 0), "{m}");
    t.terminate();
}

/// RFC 9112's framing rules, as the engine applies them on the wire: each refused with 400
/// and the connection closed, nothing sent to the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_framing_is_refused_before_the_server_sees_it() {
    let (server, seen) = scripted_server().await;
    let t = start(server, "");
    for (case, head) in [
        ("CL and TE", &b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"[..]),
        ("differing CL", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
        ("TE not chunked last", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
        ("TE on 1.0", b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("bare LF", b"GET / HTTP/1.1\nHost: a\n\n"),
        ("obs-fold", b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n"),
        ("space before colon", b"GET / HTTP/1.1\r\nHost : a\r\n\r\n"),
        ("two hosts", b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        ("no host", b"GET / HTTP/1.1\r\n\r\n"),
    ] {
        let mut s = TcpStream::connect(t.addr).await.unwrap();
        s.write_all(head).await.unwrap();
        let (text, closed) = read_all(&mut s, Duration::from_secs(2)).await;
        assert!(text.starts_with("HTTP/1.1 400 "), "{case}: {text}");
        assert!(closed, "{case}: the connection closes");
    }
    assert!(seen.requests.lock().unwrap().is_empty());
    t.terminate();
}

fn requests_4xx(metrics: &str) -> u64 {
    let key = "tether_requests_total{cluster=\"shop\",server=\"s1\",status_class=\"4xx\"} ";
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// A client that gives up while the server works is noticed at once (not when the answer
/// comes): the request is logged as 499, as nginx does, and the server's answer is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_while_the_server_works_is_a_499_at_once() {
    let (server, seen) = scripted_server().await;
    let t = start(server, "");
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(b"GET /slow HTTP/1.1\r\nHost: shop\r\n\r\n")
        .await
        .unwrap();
    while seen.requests.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = std::time::Instant::now();
    drop(s);
    let metrics = t.metrics.unwrap();
    loop {
        if requests_4xx(&scrape(metrics).await) == 1 {
            break;
        }
        assert!(
            left.elapsed() < Duration::from_secs(2),
            "not noticed before the server answered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "the client's close was noticed {:?} after it",
        left.elapsed()
    );
    t.terminate();
}

/// A connection that waits longer than a second for its next request gives its buffers
/// back meanwhile (memory per idle connection) and takes them again when it comes, however
/// the request arrives: whole, or a byte at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_idle_past_its_grace_still_serves_its_next_requests() {
    let (server, seen) = scripted_server().await;
    let t = start(server, "");
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(b"GET /1 HTTP/1.1\r\nHost: shop\r\n\r\n")
        .await
        .unwrap();
    let (first, _) = read_all(&mut s, Duration::from_millis(300)).await;
    assert!(first.ends_with("got 0 bytes"), "{first}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Longer than the idle read, sent a byte at a time.
    let long = format!(
        "POST /2 HTTP/1.1\r\nHost: shop\r\nX-Long: {}\r\nContent-Length: 5\r\n\r\nhello",
        "v".repeat(600)
    );
    for b in long.as_bytes().chunks(97) {
        s.write_all(b).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (second, closed) = read_all(&mut s, Duration::from_millis(500)).await;
    assert!(second.ends_with("got 5 bytes") && !closed, "{second}");
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].1.contains(&"v".repeat(600)));
    assert_eq!(requests[1].2, b"hello");
    t.terminate();
}

/// An absolute-form target (what a client sends a proxy it knows is one) is the engine's:
/// passed on as the client wrote it, on a kept connection; one whose authority is not its
/// `Host` is refused (400) and the connection closed, as pingora-core refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_form_targets_are_the_engines_and_must_name_their_host() {
    let (server, seen) = scripted_server().await;
    let t = start(server, "");
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(b"GET http://shop:8080/a?b=1 HTTP/1.1\r\nHost: shop:8080\r\n\r\nGET HTTP://other/c HTTP/1.1\r\nHost: shop\r\n\r\nGET /never HTTP/1.1\r\nHost: shop\r\n\r\n")
        .await
        .unwrap();
    let (text, closed) = read_all(&mut s, Duration::from_secs(2)).await;
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(
        text.contains("HTTP/1.1 400 Bad Request\r\n")
            && text.ends_with("Host differs from the request target's authority\n"),
        "{text}"
    );
    assert!(closed);
    let heads: Vec<_> = seen
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.1.clone())
        .collect();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(
        heads[0].starts_with("GET http://shop:8080/a?b=1 HTTP/1.1\r\n"),
        "{heads:?}"
    );
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!((count(&m, "engine"), count(&m, "handover")), (2, 0), "{m}");
    t.terminate();
}
