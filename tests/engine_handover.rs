//! A real curl's `Expect: 100-continue` upload, which tether's HTTP/1 engine answers and
//! carries itself, a WebSocket upgrade, which it tunnels itself, and an `OPTIONS *`, which
//! it hands to pingora-proxy with the bytes it read replayed (counted as `handover` in
//! `tether_engine_requests_total`).

mod common;

use common::recording::{read_more, read_until, recording_server};
use common::{engine_requests as count, scrape, Opts, Tether};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

fn start_engine(server: SocketAddr) -> Tether {
    Tether::start_with(Opts {
        cluster: format!("    servers:\n      - {{ name: s1, address: \"{server}\" }}\n"),
        listener_extra: "    http1: engine\n".to_string(),
        metrics: true,
        ..Opts::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_continue_and_websockets_on_the_engine_options_star_through_the_handover() {
    let (server, seen) = recording_server().await;
    let t = start_engine(server);
    // curl sends `Expect: 100-continue` for a body over 1 MiB and waits for the 100.
    let dir = common::scratch_dir("engine-expect");
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
    // A WebSocket handshake, then bytes both ways through the upgraded connection: the
    // engine's own tunnel, from the first attempt.
    let mut s = tokio::net::TcpStream::connect(t.addr).await.unwrap();
    s.write_all(b"GET /ws HTTP/1.1\r\nHost: shop\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let end = read_until(&mut s, &mut buf, b"\r\n\r\n").await.unwrap();
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(
        head.contains("\r\nconnection: upgrade\r\n") && head.contains("\r\nupgrade: websocket\r\n"),
        "{head}"
    );
    buf.drain(..end);
    s.write_all(b"ping through the tunnel").await.unwrap();
    while buf.len() < 23 {
        let more = tokio::time::timeout(Duration::from_secs(5), read_more(&mut s, &mut buf));
        assert!(more.await.unwrap(), "the tunnel closed");
    }
    assert_eq!(buf, b"ping through the tunnel");
    drop(s);
    // `OPTIONS *` is not the engine's: handed over with the bytes it read, from a loopback
    // address of its own (the handed-over request still knows its client: Pingora's digest
    // of the socket, made when pingora-proxy asks for it).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.7:0".parse().unwrap()).unwrap();
    let mut s = socket.connect(t.addr).await.unwrap();
    s.write_all(b"OPTIONS * HTTP/1.1\r\nHost: shop\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, b"\r\n\r\n").await.unwrap();
    assert!(
        buf.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf)
    );
    let seen = seen.lock().unwrap().clone();
    let upload = seen
        .iter()
        .find(|r| r.head.starts_with("POST /upload"))
        .unwrap();
    assert_eq!(upload.body.len(), 1_100_000);
    let ws = seen.iter().find(|r| r.head.starts_with("GET /ws")).unwrap();
    let ws_head = ws.head.to_ascii_lowercase();
    assert!(
        ws_head.contains("\r\nupgrade: websocket\r\n")
            && ws_head.contains("\r\nconnection: upgrade\r\n"),
        "the server is asked for the upgrade: {}",
        ws.head
    );
    let options = seen
        .iter()
        .find(|r| r.head.starts_with("OPTIONS *"))
        .unwrap();
    assert!(
        options
            .head
            .to_ascii_lowercase()
            .contains("\r\nx-forwarded-for: 127.0.0.7\r\n"),
        "the client's address reaches the server: {}",
        options.head
    );
    assert!(
        !upload.head.to_ascii_lowercase().contains("expect:"),
        "the server is not asked again: {}",
        upload.head
    );
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!(count(&m, "handover"), 1, "{m}");
    assert_eq!(count(&m, "engine"), 2, "the upload and the WebSocket: {m}");
    t.terminate();
}
