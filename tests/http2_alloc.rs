//! Heap allocations per request of tether's HTTP/2 front end on a kept connection, counted
//! and printed: the front end serves a real h2c connection over loopback, in this process,
//! with a counting global allocator that counts the serving thread only (the client and
//! the server run on threads of their own). HTTP/2 allocates per stream where HTTP/1 on
//! tether's engine does not: the `h2` crate makes each stream's state, its request's
//! `http::request::Parts` and field map, and each DATA frame's `Bytes`, and the front end
//! the stream's task and its exchange's buffers. The bound asserted is a regression guard.
//!
//! The same allocator keeps the bytes the serving thread holds, for what an idle
//! connection keeps between its streams.

use bytes::Bytes;
use pingora_core::connectors::ConnectorOptions;
use pingora_core::protocols::Stream;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use tether::front::listener::tcp::TcpClient;

#[path = "common/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const REQUESTS: usize = 300;
const WARM_UP: usize = 50;

/// The most allocations a request may make after the warm-up (about twice what it makes
/// now).
const BOUND: f64 = 24.0;

/// The most heap bytes an idle connection may hold once its streams ended: the `h2`
/// crate's buffers (16 KiB to write, 8 KiB to read, 4 KiB for HPACK), its state and the
/// connection's task, with room for little more. A finished stream's future (several KiB)
/// must not be among them.
const IDLE_BOUND: i64 = 40 * 1024;

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

/// tether's HTTP/2 front end for an h2c listener in front of `backend`.
fn front(backend: std::net::SocketAddr) -> tether::front::http2::Http2 {
    let yaml = format!(
        "listeners:\n  - {{ name: web, address: \"127.0.0.1:0\", cluster: shop, h2c: true }}\nclusters:\n  - name: shop\n    servers:\n      - {{ name: n1, address: \"{backend}\" }}\n"
    );
    let config = tether::config::parse(&yaml, "http2-alloc").expect("valid config");
    let snapshot = Arc::new(arc_swap::ArcSwap::from_pointee(
        tether::state::snapshot::Snapshot::build(&config, None),
    ));
    tether::front::http2::Http2::new(tether::front::streams::Streams::new(
        snapshot,
        0,
        "web",
        None,
        ConnectorOptions::new(8),
    ))
}

/// Serves `tcp` on this thread's runtime, in a task as the listener does.
fn serve(
    http2: &Arc<tether::front::http2::Http2>,
    tcp: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let http2 = http2.clone();
    tokio::spawn(async move {
        let stream: Stream = Box::new(TcpClient::new(tcp, peer));
        let (peer, local) = tether::front::listener::tcp::addresses(&stream);
        let link = tether::front::streams::Link {
            peer,
            local,
            tls: None,
            proxy: None,
        };
        http2.serve(stream, link, shutdown).await;
    });
}

/// Heap bytes this thread holds once what it runs had `settle` to go quiet.
async fn held_after(settle: std::time::Duration) -> i64 {
    tokio::time::sleep(settle).await;
    counting::live()
}

#[test]
fn an_idle_connection_holds_little_beyond_the_h2_crates_buffers() {
    let http2 = Arc::new(front(server()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let held = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let (marks, mut marked) = tokio::sync::mpsc::unbounded_channel();
        let (go, mut went) = tokio::sync::mpsc::unbounded_channel::<()>();
        // Two connections, one after the other, each left idle after a few streams: the
        // second one's bytes are the figure, the first made what is made once (the
        // thread's pool of server connections, its caches).
        let client = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let mut kept = Vec::new();
                for _ in 0..2 {
                    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
                    let (client, conn) = h2::client::handshake(tcp).await.unwrap();
                    tokio::spawn(conn);
                    for i in 0..5 {
                        let mut client = client.clone().ready().await.unwrap();
                        let req = http::Request::builder()
                            .uri(format!("http://shop/item/{i}"))
                            .header("cookie", "JSESSIONID=ABC.n1")
                            .body(())
                            .unwrap();
                        let (response, _) = client.send_request(req, true).unwrap();
                        let mut body = response.await.unwrap().into_body();
                        while let Some(data) = body.data().await {
                            let _ = body.flow_control().release_capacity(data.unwrap().len());
                        }
                    }
                    kept.push(client);
                    marks.send(()).unwrap();
                    went.recv().await.unwrap();
                }
            })
        });
        let mut at = Vec::new();
        for _ in 0..2 {
            let (tcp, peer) = listener.accept().await.unwrap();
            serve(&http2, tcp, peer, shutdown.clone());
            marked.recv().await.unwrap();
            at.push(held_after(std::time::Duration::from_millis(200)).await);
            go.send(()).unwrap();
        }
        client.join().unwrap();
        at[1] - at[0]
    });
    println!("heap bytes an idle HTTP/2 connection holds (h2c, after 5 streams): {held}");
    assert!(
        held <= IDLE_BOUND,
        "an idle connection holds {held} bytes, more than {IDLE_BOUND}"
    );
}

#[test]
fn allocations_per_http2_request_are_counted_and_bounded() {
    let http2 = front(server());
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
        let (peer, local) = tether::front::listener::tcp::addresses(&stream);
        let link = tether::front::streams::Link {
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
