//! A real curl's `Expect: 100-continue` upload, which tether's HTTP/1 engine answers and
//! carries itself, and a WebSocket upgrade, which it hands to pingora-proxy with the bytes
//! it read replayed (counted as `handover` in `tether_engine_requests_total`).

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
async fn expect_continue_on_the_engine_and_websocket_upgrades_through_the_handover() {
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
    // A WebSocket handshake, then bytes both ways through the upgraded connection.
    // Pingora 0.9 has a race here, seen before issue 22 as well (1 run in 4 to 20 under
    // load): when the request's empty-body end reaches its upstream half after the `101`,
    // it ends the tunnel at once. Up to three connections are tried, each counted; one
    // must carry the bytes both ways.
    let mut attempts = 0;
    let mut tunnelled = false;
    while attempts < 3 && !tunnelled {
        attempts += 1;
        // From a loopback address of its own: the handed-over request still knows its
        // client (Pingora's digest of the socket, made when pingora-proxy asks for it).
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.7:0".parse().unwrap()).unwrap();
        let mut s = socket.connect(t.addr).await.unwrap();
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
    let ws = seen.iter().find(|r| r.head.starts_with("GET /ws")).unwrap();
    assert!(
        ws.head
            .to_ascii_lowercase()
            .contains("\r\nx-forwarded-for: 127.0.0.7\r\n"),
        "the client's address reaches the server: {}",
        ws.head
    );
    assert!(
        !upload.head.to_ascii_lowercase().contains("expect:"),
        "the server is not asked again: {}",
        upload.head
    );
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!(count(&m, "handover"), attempts, "{m}");
    assert_eq!(count(&m, "engine"), 1, "{m}");
    t.terminate();
}
