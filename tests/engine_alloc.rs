//! tether's HTTP/1 engine makes no heap allocation per request on a kept-alive connection
//! in the steady state, plain and over TLS: the engine serves a real connection
//! over loopback, in this process, with a counting global allocator that counts the
//! engine's thread only (the client and the server run on threads of their own). Rust's
//! allocator is what is counted: BoringSSL's own buffers come from C's `malloc`.

use pingora_core::connectors::ConnectorOptions;
use pingora_core::protocols::Stream;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use tether::front::engine::{Conn, Engine, Next};
use tether::front::listener::tcp::TcpClient;

#[path = "common/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const REQUESTS: usize = 200;
const WARM_UP: usize = 20;

/// Reads a head: its first line and its `Content-Length` (0 without one); `None` at the end.
fn read_head(reader: &mut impl BufRead) -> Option<(String, usize)> {
    let mut first = String::new();
    if reader.read_line(&mut first).ok()? == 0 {
        return None;
    }
    let mut len = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().ok()?;
        }
        if line == "\r\n" {
            return Some((first, len));
        }
    }
}

/// A keep-alive server on its own thread: `200` and a 100-byte body, with a session cookie
/// on the first answer of each connection.
fn server() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut conn = conn;
                let mut first = true;
                loop {
                    let Some((_, len)) = read_head(&mut reader) else {
                        return;
                    };
                    let mut body = vec![0; len];
                    reader.read_exact(&mut body).unwrap();
                    let cookie = if std::mem::take(&mut first) {
                        "Set-Cookie: JSESSIONID=ABC.n1; Path=/\r\n"
                    } else {
                        ""
                    };
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\n{cookie}Content-Length: 100\r\n\r\n{}",
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

/// A client on its own thread: `REQUESTS` requests one after another on one connection,
/// each read whole before the next is sent (GETs with the session's cookie, every third a
/// small POST).
/// With `tls`, over TLS (the certificate is not checked: the test made it).
fn client(addr: std::net::SocketAddr, tls: bool) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let tcp = std::net::TcpStream::connect(addr).unwrap();
        let conn: Box<dyn ReadWrite> = if tls {
            let mut c = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
            c.set_verify(boring::ssl::SslVerifyMode::NONE);
            c.set_alpn_protos(b"\x08http/1.1").unwrap();
            Box::new(
                c.build()
                    .connect("localhost", tcp)
                    .expect("a TLS handshake"),
            )
        } else {
            Box::new(tcp)
        };
        let mut reader = BufReader::new(conn);
        let mut ok = 0;
        for i in 0..REQUESTS {
            let req = if i % 3 == 2 {
                "POST /cart HTTP/1.1\r\nHost: shop\r\nCookie: JSESSIONID=ABC.n1\r\nContent-Length: 5\r\n\r\nhello".to_string()
            } else {
                format!("GET /item/{i}?q=1 HTTP/1.1\r\nHost: shop\r\nCookie: JSESSIONID=ABC.n1; theme=dark\r\nUser-Agent: alloc-test\r\n\r\n")
            };
            reader.get_mut().write_all(req.as_bytes()).unwrap();
            let (status, len) = read_head(&mut reader).expect("an answer");
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            ok += usize::from(status.starts_with("HTTP/1.1 200"));
        }
        ok
    })
}

trait ReadWrite: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWrite for T {}

#[test]
fn a_kept_alive_connection_costs_no_allocation_per_request() {
    serve_and_count(false);
}

#[test]
fn a_kept_alive_tls_connection_costs_no_allocation_per_request() {
    serve_and_count(true);
}

/// Serves `REQUESTS` requests of one client connection (TLS with `tls`) and asserts that
/// none after the warm-up allocated on the engine's thread.
fn serve_and_count(tls: bool) {
    let backend = server();
    // One directory per test: the two tests run at once, each with a certificate of its own.
    let dir =
        std::env::temp_dir().join(format!("tether-engine-alloc-{}-{tls}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.key_pair.serialize_pem()).unwrap();
    let tls_yaml = match tls {
        true => format!(
            ", tls: {{ cert: \"{}\", key: \"{}\" }}",
            dir.join("cert.pem").display(),
            dir.join("key.pem").display()
        ),
        false => String::new(),
    };
    let yaml = format!(
        "listeners:\n  - {{ name: web, address: \"127.0.0.1:0\", cluster: shop, http1: engine{tls_yaml} }}\nclusters:\n  - name: shop\n    servers:\n      - {{ name: n1, address: \"{backend}\" }}\n      - {{ name: n2, address: \"127.0.0.1:1\" }}\n"
    );
    let config = tether::config::parse(&yaml, "engine-alloc").expect("valid config");
    let snapshot = Arc::new(arc_swap::ArcSwap::from_pointee(
        tether::state::snapshot::Snapshot::build(&config, None),
    ));
    // The acceptor tether's listener would hand the connection to (`tether::process::service`).
    let acceptor =
        tether::state::tls::build_listeners(&config).expect("the test's certificate")[0].clone();
    assert_eq!(acceptor.is_some(), tls, "the listener's TLS as configured");
    let engine = Engine::new(
        snapshot,
        0,
        "web",
        None,
        ConnectorOptions::new(8),
        config.server.idle_buffers_per_thread,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (served, counted) = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = client(listener.local_addr().unwrap(), tls);
        let (tcp, peer) = listener.accept().await.unwrap();
        // As tether's listener hands them on: a plain connection as its own accept loop
        // makes it, a TLS one over Pingora's stream.
        let stream: Stream = match &acceptor {
            Some(a) => {
                let l4 = pingora_core::protocols::l4::stream::Stream::from(tcp);
                Box::new(
                    pingora_core::protocols::tls::server::handshake(&a.acceptor, l4)
                        .await
                        .expect("the server's half of the handshake"),
                )
            }
            None => Box::new(TcpClient::new(tcp, peer)),
        };
        let addresses = tether::front::listener::tcp::addresses(&stream);
        let mut conn = Conn::new(stream, addresses);
        let mut counted = Vec::new();
        let mut warm_up = 0;
        for i in 0..REQUESTS {
            let before = counting::so_far();
            conn = match engine.serve(conn, false, i == 0).await {
                Next::KeepAlive(c) => c,
                _ => panic!("request {i}: the connection did not stay open"),
            };
            let made = counting::so_far() - before;
            match i >= WARM_UP {
                true => counted.push(made),
                false => warm_up += made,
            }
        }
        (client.join().unwrap(), (warm_up, counted))
    });
    assert_eq!(served, REQUESTS, "every request answered 200");
    let (warm_up, counted) = counted;
    // The counter sees the engine's thread: the first request's server connection and
    // buffers are allocations.
    assert!(warm_up > 0, "nothing counted while warming up");
    let total: u64 = counted.iter().sum();
    println!(
        "{} requests after {WARM_UP} to warm up{}: {total} heap allocations on the engine's thread",
        counted.len(),
        if tls { ", over TLS" } else { "" }
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(total, 0, "allocations per request: {counted:?}");
}
