//! Request bodies on tether's own HTTP/1 engine: a body larger than the
//! listener's `request_buffer`, or chunked, is read in part before a server is chosen and
//! streams to the server after it, on the engine (counted as `engine`, none handed over).
//! What the server gets (every byte, in chunks tether framed itself), what happens when
//! the server answers before the body ends, when the body turns malformed half-way, and
//! that a body that streamed is never sent again.

mod common;

use common::recording::{read_all, read_more, read_request, read_until};
use common::{engine_requests as count, scrape, Opts, Tether};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// What the server saw: each whole request (its connection, head, body as sent), and the
/// requests whose connection closed before their body's end.
#[derive(Default)]
struct Seen {
    requests: Mutex<Vec<(usize, String, Vec<u8>)>>,
    connections: AtomicUsize,
    cut_short: AtomicUsize,
}

/// A server that answers `200 got <n> bytes`, but: `/early` gets `413` as soon as its head
/// is read (the body is not read; the server stops sending and discards what comes, as
/// servers that linger on close do); `/flaky` reads the head and 100 kB of body, then
/// closes without an answer.
async fn server() -> (SocketAddr, Arc<Seen>) {
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
        let Some(end) = read_until(&mut s, &mut buf, b"\r\n\r\n").await else {
            return;
        };
        let path = String::from_utf8_lossy(&buf[..end])
            .split(' ')
            .nth(1)
            .unwrap_or("")
            .to_string();
        if path == "/early" {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            seen.requests.lock().unwrap().push((conn, head, Vec::new()));
            let answer = "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo much";
            let _ = s.write_all(answer.as_bytes()).await;
            let _ = s.shutdown().await;
            while tokio::time::timeout(Duration::from_secs(2), read_more(&mut s, &mut buf))
                .await
                .is_ok_and(|more| more)
            {
                buf.clear();
            }
            return;
        }
        if path == "/flaky" {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            seen.requests.lock().unwrap().push((conn, head, Vec::new()));
            while buf.len() < end + 100_000 && read_more(&mut s, &mut buf).await {}
            return;
        }
        let Some((head, body)) = read_request(&mut s, &mut buf).await else {
            if !buf.is_empty() {
                seen.cut_short.fetch_add(1, Ordering::SeqCst);
            }
            return;
        };
        let len = body.len();
        seen.requests.lock().unwrap().push((conn, head, body));
        let text = format!("got {len} bytes");
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if s.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn start(server: SocketAddr) -> Tether {
    Tether::start_with(Opts {
        cluster: format!("    servers:\n      - {{ name: s1, address: \"{server}\" }}\n"),
        listener_extra: "    http1: engine\n".to_string(),
        metrics: true,
        ..Opts::default()
    })
}

fn letters(n: usize) -> Vec<u8> {
    (0..n).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Reads a chunked body strictly, as tether must have framed it: sizes in bare hex (no
/// extension), CRLF, no trailer. The data, or what was wrong.
fn dechunk_strict(mut raw: &[u8]) -> Result<Vec<u8>, String> {
    let mut data = Vec::new();
    loop {
        let line = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("no size line")?;
        let size = std::str::from_utf8(&raw[..line]).map_err(|e| e.to_string())?;
        let n = usize::from_str_radix(size, 16).map_err(|_| format!("size line {size:?}"))?;
        raw = &raw[line + 2..];
        if n == 0 {
            return match raw {
                b"\r\n" => Ok(data),
                other => Err(format!(
                    "after the last chunk: {:?}",
                    String::from_utf8_lossy(other)
                )),
            };
        }
        data.extend_from_slice(&raw[..n]);
        if &raw[n..n + 2] != b"\r\n" {
            return Err("no CRLF after a chunk".into());
        }
        raw = &raw[n + 2..];
    }
}

/// A 1 MB body of known length, then a chunked one (with chunk extensions, sizes with
/// leading zeros and a trailer), then a GET, pipelined on one connection: every byte
/// reaches the server in order on one kept server connection, the chunked body in chunks
/// tether framed (no extension, no trailer of the client's), and the client's connection
/// goes on after both bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_and_chunked_bodies_stream_on_the_engine_and_the_connection_goes_on() {
    let (addr, seen) = server().await;
    let t = start(addr);
    let big = letters(1_000_000);
    let mut chunked = Vec::new();
    let chunked_data = letters(300_000);
    let mut at = 0;
    for size in [1usize, 7, 4096, 65_536, 70_000, 3, 100_000].iter().cycle() {
        if at == chunked_data.len() {
            break;
        }
        let n = (*size).min(chunked_data.len() - at);
        chunked.extend_from_slice(format!("000{n:x};ext=\"a;b\"\r\n").as_bytes());
        chunked.extend_from_slice(&chunked_data[at..at + n]);
        chunked.extend_from_slice(b"\r\n");
        at += n;
    }
    chunked.extend_from_slice(b"0\r\nX-Trailer: secret\r\n\r\n");
    let mut wire = format!(
        "POST /cl HTTP/1.1\r\nHost: shop\r\nContent-Length: {}\r\n\r\n",
        big.len()
    )
    .into_bytes();
    wire.extend_from_slice(&big);
    wire.extend_from_slice(
        b"POST /ch HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    wire.extend_from_slice(&chunked);
    wire.extend_from_slice(b"GET /after HTTP/1.1\r\nHost: shop\r\n\r\n");
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    let writer = tokio::spawn(async move {
        for burst in wire.chunks(150_000) {
            s.write_all(burst).await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        s
    });
    let mut s = writer.await.unwrap();
    let (text, closed) = read_all(&mut s, Duration::from_millis(1500)).await;
    assert!(!closed, "the client's connection was closed: {text}");
    let statuses = text.matches("HTTP/1.1 200 OK").count();
    assert_eq!(statuses, 3, "{text}");
    assert!(text.contains("got 1000000 bytes"), "{text}");
    let requests = seen.requests.lock().unwrap().clone();
    let paths: Vec<_> = requests
        .iter()
        .map(|r| r.1.split(' ').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(paths, ["/cl", "/ch", "/after"]);
    assert!(requests.iter().all(|r| r.0 == 1), "one server connection");
    assert!(
        requests[0].2 == big,
        "the 1 MB body arrived whole, in order"
    );
    let raw = &requests[1].2;
    assert_eq!(dechunk_strict(raw).as_deref(), Ok(&chunked_data[..]));
    let raw_text = String::from_utf8_lossy(raw);
    assert!(!raw_text.contains("ext=") && !raw_text.contains("X-Trailer"));
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!((count(&m, "engine"), count(&m, "handover")), (3, 0), "{m}");
    t.terminate();
}

/// A server that answers (413) before the body's end and stops reading: the client gets
/// that answer, then its connection closes (the rest of its body would be read as a next
/// request otherwise); the server's connection is not kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_before_the_bodys_end_reaches_the_client_and_the_connection_closes() {
    let (addr, seen) = server().await;
    let t = start(addr);
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    let mut wire =
        b"POST /early HTTP/1.1\r\nHost: shop\r\nContent-Length: 5000000\r\n\r\n".to_vec();
    wire.extend_from_slice(&letters(300_000));
    s.write_all(&wire).await.unwrap();
    let (text, closed) = read_all(&mut s, Duration::from_secs(5)).await;
    assert!(
        text.starts_with("HTTP/1.1 413 Payload Too Large\r\n"),
        "{text}"
    );
    assert!(text.ends_with("\r\n\r\ntoo much"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    assert!(
        closed,
        "the client's connection stays open after an unread body"
    );
    // The next request goes on a new server connection.
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(b"GET /next HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let (text, _) = read_all(&mut s, Duration::from_secs(2)).await;
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2]);
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!((count(&m, "engine"), count(&m, "handover")), (2, 0), "{m}");
    t.terminate();
}

/// A chunked body that turns malformed after its first part (a size that is not hex) is
/// refused (400) when it is read, the server's request abandoned (its connection closed
/// before the body's end), and the client's connection closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_malformed_after_its_first_part_is_refused_and_abandoned() {
    let (addr, seen) = server().await;
    let t = start(addr);
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    let mut wire = b"POST /x HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    wire.extend_from_slice(format!("{:x}\r\n", 100_000).as_bytes());
    wire.extend_from_slice(&letters(100_000));
    wire.extend_from_slice(b"\r\nzz\r\nmore\r\n0\r\n\r\n");
    s.write_all(&wire).await.unwrap();
    let (text, closed) = read_all(&mut s, Duration::from_secs(5)).await;
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert!(text.contains("malformed chunked body"), "{text}");
    assert!(closed);
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while seen.cut_short.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        seen.cut_short.load(Ordering::SeqCst),
        1,
        "the server's request was abandoned"
    );
    assert!(seen.requests.lock().unwrap().is_empty());
    t.terminate();
}

/// A kept server connection that the server closes while a large `PUT` streams on it:
/// idempotent, but its body is gone past the first part, so it is not sent again (a new
/// connection would get a head promising bytes that no longer exist): 502, one try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_streamed_is_never_sent_again() {
    let (addr, seen) = server().await;
    let t = start(addr);
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(b"GET /warm HTTP/1.1\r\nHost: shop\r\n\r\n")
        .await
        .unwrap();
    let (text, _) = read_all(&mut s, Duration::from_millis(300)).await;
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    let mut wire = b"PUT /flaky HTTP/1.1\r\nHost: shop\r\nContent-Length: 1000000\r\n\r\n".to_vec();
    wire.extend_from_slice(&letters(1_000_000));
    let writer = tokio::spawn(async move {
        let _ = s.write_all(&wire).await;
        s
    });
    let mut s = writer.await.unwrap();
    let (text, closed) = read_all(&mut s, Duration::from_secs(5)).await;
    assert!(text.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{text}");
    assert!(closed);
    let requests = seen.requests.lock().unwrap().clone();
    let flaky = requests.iter().filter(|r| r.1.contains("/flaky")).count();
    assert_eq!(flaky, 1, "the PUT was sent again");
    t.terminate();
}
