//! A kept-alive connection that waits past the engine's grace (a second) gives its buffers
//! and its request's future back and waits in a small future of its own (issue 24, memory
//! per idle connection). Over TLS its next request must still come through that wait whole:
//! BoringSSL hands the wait's first read a record's bytes and keeps the rest; on plain TCP
//! the record is made again around that read.

mod common;

use common::pki::Pki;
use common::{scratch_dir, server_line, tomcats, Opts, Tether};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Reads one answer (head and `Content-Length` body) from `conn`: its status line.
fn answer(conn: &mut impl Read) -> String {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        assert_eq!(
            conn.read(&mut byte).unwrap(),
            1,
            "closed in a head: {got:?}"
        );
        got.push(byte[0]);
    }
    let head = String::from_utf8(got).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .expect("a Content-Length");
    let mut body = vec![0; len];
    conn.read_exact(&mut body).unwrap();
    head.lines().next().unwrap().to_string()
}

/// Three requests on `conn`, waiting past the grace after the first two: their statuses.
/// The second is longer than the wait's first read.
fn idle_between_requests(conn: &mut (impl Read + Write)) -> Vec<String> {
    let long = format!(
        "GET /2 HTTP/1.1\r\nHost: a.test\r\nX-Long: {}\r\n\r\n",
        "v".repeat(9000)
    );
    let mut statuses = Vec::new();
    for (request, pause) in [
        ("GET /1 HTTP/1.1\r\nHost: a.test\r\n\r\n".to_string(), 1500),
        (long, 1500),
        ("GET /3 HTTP/1.1\r\nHost: a.test\r\n\r\n".to_string(), 0),
    ] {
        conn.write_all(request.as_bytes()).unwrap();
        statuses.push(answer(conn));
        std::thread::sleep(Duration::from_millis(pause));
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_connection_idle_past_the_grace_serves_its_next_requests() {
    let dir = scratch_dir("engine-idle-tls");
    let pki = Pki::new(&dir);
    let sims = tomcats(1).await;
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
        listener_extra: pki.listener_tls(),
        metrics: true,
        ..Opts::default()
    });
    let addr = t.addr;
    let client = tokio::task::spawn_blocking(move || {
        let mut c = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
        c.set_verify(boring::ssl::SslVerifyMode::NONE);
        let tcp = TcpStream::connect(addr).unwrap();
        let mut tls = c.build().connect("a.test", tcp).unwrap();
        idle_between_requests(&mut tls)
    });
    let statuses = client.await.unwrap();
    assert_eq!(statuses, ["HTTP/1.1 200 OK"; 3]);
    // All three on the one connection: one handshake.
    let scrape = common::scrape(t.metrics.unwrap()).await;
    assert!(
        scrape.contains(r#"tether_tls_handshakes_total{listener="web",result="ok"} 1"#),
        "{scrape}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The same on plain TCP, where the connection's whole record is given back while it waits
/// and made again around the wait's first read (a request longer than that read too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_connection_idle_past_the_grace_serves_its_next_requests() {
    let sims = tomcats(1).await;
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
        ..Opts::default()
    });
    let addr = t.addr;
    let statuses = tokio::task::spawn_blocking(move || {
        idle_between_requests(&mut TcpStream::connect(addr).unwrap())
    })
    .await
    .unwrap();
    assert_eq!(statuses, ["HTTP/1.1 200 OK"; 3]);
}
