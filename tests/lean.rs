//! The lean HTTP/1 path (`http1: lean`, issue 17) over real sockets: what it serves itself,
//! what it hands to Pingora's proxy (chunked bodies, `Expect: 100-continue`, upgrades,
//! pipelined requests behind them), and what the server receives either way. The rest of
//! the suite runs on the lean path with `TETHER_HTTP1=lean`.

mod common;

use common::recording::{read_more, read_until, recording_server};
use common::{scrape, Opts, Tether};
use std::net::SocketAddr;

use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn start_lean(server: SocketAddr) -> Tether {
    Tether::start_with(Opts {
        cluster: format!("    servers:\n      - {{ name: s1, address: \"{server}\" }}\n"),
        listener_extra: "    http1: lean\n".to_string(),
        metrics: true,
        ..Opts::default()
    })
}

/// Reads responses from `s` until `n` complete ones (with `Content-Length` bodies) arrived.
async fn responses(s: &mut TcpStream, n: usize) -> Vec<String> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while out.len() < n {
        let end =
            tokio::time::timeout(Duration::from_secs(5), read_until(s, &mut buf, b"\r\n\r\n"))
                .await
                .expect("a response in time")
                .expect("a response before the close");
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        let len = head
            .to_ascii_lowercase()
            .lines()
            .find_map(|l| l.strip_prefix("content-length: ").map(str::to_string))
            .map_or(0, |v| v.trim().parse::<usize>().unwrap());
        while buf.len() < end + len {
            assert!(read_more(s, &mut buf).await, "closed mid-body");
        }
        let body = String::from_utf8_lossy(&buf[end..end + len]).to_string();
        out.push(format!("{}|{body}", head.lines().next().unwrap()));
        buf.drain(..end + len);
    }
    out
}

fn lean_count(metrics: &str, path: &str) -> u64 {
    let key = format!("tether_lean_requests_total{{listener=\"web\",path=\"{path}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&key))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_requests_are_served_lean_and_others_handed_over_on_the_same_connection() {
    let (server, seen) = recording_server().await;
    let t = start_lean(server);
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    // Lean: a GET with the client's hop fields, and a small POST.
    s.write_all(b"GET /a HTTP/1.1\r\nHost: shop\r\nConnection: keep-alive\r\nKeep-Alive: timeout=9\r\nProxy-Authorization: Basic eDp5\r\n\r\n")
        .await
        .unwrap();
    s.write_all(b"POST /b HTTP/1.1\r\nHost: shop\r\nContent-Length: 5\r\n\r\nhello")
        .await
        .unwrap();
    assert_eq!(
        responses(&mut s, 2).await,
        ["HTTP/1.1 200 OK|got 0 bytes", "HTTP/1.1 200 OK|got 5 bytes"]
    );
    // Handed over: a chunked body; then the connection stays with Pingora's proxy.
    s.write_all(b"POST /c HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n")
        .await
        .unwrap();
    s.write_all(b"GET /d HTTP/1.1\r\nHost: shop\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(
        responses(&mut s, 2).await,
        ["HTTP/1.1 200 OK|got 7 bytes", "HTTP/1.1 200 OK|got 0 bytes"]
    );
    let seen = seen.lock().unwrap().clone();
    let paths: Vec<_> = seen
        .iter()
        .map(|r| r.head.split(' ').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(paths, ["/a", "/b", "/c", "/d"]);
    let a = seen[0].head.to_ascii_lowercase();
    for hop in [
        "keep-alive: timeout",
        "proxy-authorization",
        "connection: keep-alive",
    ] {
        assert!(!a.contains(hop), "{hop} reached the server: {a}");
    }
    assert!(a.starts_with("get /a http/1.1\r\n"), "{a}");
    assert!(a.contains("x-forwarded-for: 127.0.0.1"), "{a}");
    assert_eq!(seen[1].body, b"hello");
    assert_eq!(seen[2].body, b"abcdefg");
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!(lean_count(&m, "lean"), 2, "{m}");
    assert_eq!(lean_count(&m, "handover"), 1, "{m}");
    t.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_replays_pipelined_requests_and_bodies_read_with_the_head() {
    let (server, seen) = recording_server().await;
    let t = start_lean(server);
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    // One write: a lean request, then one to hand over with its body, then one more.
    s.write_all(b"GET /1 HTTP/1.1\r\nHost: shop\r\n\r\nPOST /2 HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nworld\r\n0\r\n\r\nGET /3 HTTP/1.1\r\nHost: shop\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(
        responses(&mut s, 3).await,
        [
            "HTTP/1.1 200 OK|got 0 bytes",
            "HTTP/1.1 200 OK|got 5 bytes",
            "HTTP/1.1 200 OK|got 0 bytes"
        ]
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[1].body, b"world");
    t.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_continue_and_websocket_upgrades_work_through_the_handover() {
    let (server, seen) = recording_server().await;
    let t = start_lean(server);
    // curl sends `Expect: 100-continue` for a body over 1 MiB and waits for the 100.
    let dir = common::scratch_dir("lean-expect");
    let file = dir.join("body");
    std::fs::write(&file, vec![b'x'; 1_100_000]).unwrap();
    let (addr, file2) = (t.addr, file.clone());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl")
            .args([
                "-sS",
                "--expect100-timeout",
                "10",
                "-H",
                "Expect: 100-continue",
            ])
            .arg("--data-binary")
            .arg(format!("@{}", file2.display()))
            .arg(format!("http://{addr}/upload"))
            .output()
            .expect("curl")
    })
    .await
    .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "got 1100000 bytes",
        "{out:?}"
    );
    // A WebSocket handshake, then bytes both ways through the upgraded connection.
    // Pingora 0.9 has a race here, seen before issue 22 as well (1 run in 4 to 20 under
    // load): when the request's empty-body end reaches its upstream half after the `101`,
    // it ends the tunnel at once. Up to three connections are tried, each counted; one
    // must carry the bytes both ways.
    let mut attempts = 0;
    let mut tunnelled = false;
    while attempts < 3 && !tunnelled {
        attempts += 1;
        let mut s = TcpStream::connect(t.addr).await.unwrap();
        s.write_all(b"GET /ws HTTP/1.1\r\nHost: shop\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
            .await
            .unwrap();
        let mut buf = Vec::new();
        let end = read_until(&mut s, &mut buf, b"\r\n\r\n").await.unwrap();
        assert!(
            buf.starts_with(b"HTTP/1.1 101"),
            "{}",
            String::from_utf8_lossy(&buf)
        );
        buf.drain(..end);
        s.write_all(b"ping through the tunnel").await.unwrap();
        let mut open = true;
        while open && buf.len() < 23 {
            let more = tokio::time::timeout(Duration::from_secs(5), read_more(&mut s, &mut buf));
            open = more.await.unwrap();
        }
        if open {
            assert_eq!(buf, b"ping through the tunnel");
            tunnelled = true;
        } else {
            eprintln!(
                "attempt {attempts}: the tunnel was closed after the 101 (Pingora's upgrade race)"
            );
        }
    }
    assert!(
        tunnelled,
        "no upgraded connection carried bytes in {attempts} attempts"
    );
    let seen = seen.lock().unwrap().clone();
    let upload = seen
        .iter()
        .find(|r| r.head.starts_with("POST /upload"))
        .unwrap();
    assert_eq!(upload.body.len(), 1_100_000);
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!(lean_count(&m, "handover"), 1 + attempts, "{m}");
    assert_eq!(lean_count(&m, "lean"), 0, "{m}");
    t.terminate();
}
