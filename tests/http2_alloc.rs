//! Heap allocations per request of tether's HTTP/2 front end on a kept connection, counted
//! and printed: the front end serves a real h2c connection over loopback, in this process,
//! with a counting global allocator that counts the serving thread only (the client and
//! the server run on threads of their own). HTTP/2 allocates per stream where HTTP/1 on
//! tether's engine does not: the `h2` crate makes each stream's state, its request's
//! `http::request::Parts` and field map, and each DATA frame's `Bytes`, and the front end
//! the stream's task and its exchange's buffers. The bound asserted is a regression guard.

use bytes::Bytes;
use pingora_core::connectors::ConnectorOptions;
use pingora_core::protocols::Stream;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use tether::listener::tcp::TcpClient;

#[path = "common/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const REQUESTS: usize = 300;
const WARM_UP: usize = 50;

/// The most allocations a request may make after the warm-up (about twice what it makes
/// now).
const BOUND: f64 = 24.0;

/// A keep-alive server on its own thread: `200` and a 100-byte body.
fn server() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut conn = conn;
                loop {
                    let mut len = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap();
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; len];
                    reader.read_exact(&mut body).unwrap();
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}",
                        "a".repeat(100)
                    );
                    if conn.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A client on its own thread: `REQUESTS` streams one after another on one connection,
/// each read whole before the next (GETs with a session cookie, every third a small
/// POST); `marks` is told when the warm-up is over and when the last answer came.
fn client(
    addr: std::net::SocketAddr,
    marks: tokio::sync::mpsc::UnboundedSender<()>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (client, conn) = h2::client::handshake(tcp).await.unwrap();
            tokio::spawn(conn);
            let mut ok = 0;
            for i in 0..REQUESTS {
                if i == WARM_UP {
                    marks.send(()).unwrap();
                }
                let mut client = client.clone().ready().await.unwrap();
                let post = i % 3 == 2;
                let req = http::Request::builder()
                    .method(if post { "POST" } else { "GET" })
                    .uri(format!("http://shop/item/{i}?q=1"))
                    .header("cookie", "JSESSIONID=ABC.n1")
                    .header("user-agent", "alloc-test")
                    .body(())
                    .unwrap();
                let (response, mut send) = client.send_request(req, !post).unwrap();
                if post {
                    send.send_data(Bytes::from_static(b"hello"), true).unwrap();
                }
                let response = response.await.unwrap();
                ok += usize::from(response.status() == 200);
                let mut body = response.into_body();
                while let Some(data) = body.data().await {
                    let data = data.unwrap();
                    let _ = body.flow_control().release_capacity(data.len());
                }
            }
            marks.send(()).unwrap();
            ok
        })
    })
}

#[test]
fn allocations_per_http2_request_are_counted_and_bounded() {
    let backend = server();
    let yaml = format!(
        "listeners:\n  - {{ name: web, address: \"127.0.0.1:0\", cluster: shop, h2c: true }}\nclusters:\n  - name: shop\n    servers:\n      - {{ name: n1, address: \"{backend}\" }}\n"
    );
    let config = tether::config::parse(&yaml, "http2-alloc").expect("valid config");
    let snapshot = Arc::new(arc_swap::ArcSwap::from_pointee(
        tether::snapshot::Snapshot::build(&config, None),
    ));
    let http2 = tether::http2::Http2::new(snapshot, 0, "web", None, ConnectorOptions::new(8));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (served, counted) = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (marks, mut marked) = tokio::sync::mpsc::unbounded_channel();
        let client = client(listener.local_addr().unwrap(), marks);
        let (tcp, peer) = listener.accept().await.unwrap();
        let stream: Stream = Box::new(TcpClient::new(tcp, peer));
        let (peer, local) = tether::listener::tcp::addresses(&stream);
        let link = tether::http2::Link {
            peer,
            local,
            tls: None,
            proxy: None,
        };
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let serve = http2.serve(stream, link, shutdown);
        tokio::pin!(serve);
        let mut at = Vec::new();
        while at.len() < 2 {
            // The marks first: the client's last mark is sent before it closes, and both
            // may be ready in one poll.
            tokio::select! {
                biased;
                Some(()) = marked.recv() => at.push(counting::so_far()),
                () = &mut serve => panic!("the connection ended"),
            }
        }
        (client.join().unwrap(), at[1] - at[0])
    });
    assert_eq!(served, REQUESTS, "every stream answered 200");
    let per_request = counted as f64 / (REQUESTS - WARM_UP) as f64;
    println!("allocations per HTTP/2 request (h2c, kept connection): {per_request:.1}");
    assert!(
        per_request <= BOUND,
        "{per_request:.1} allocations per request, more than {BOUND}"
    );
}
