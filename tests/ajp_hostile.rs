//! AJP servers, simulated: ones that break the protocol (a wrong magic, a head whose field
//! count lies, a length past the packet size, a connection cut in the body), where each
//! request fails with 502 (or its answer is cut when it had begun) and tether does not
//! panic; connections reused exactly when `END_RESPONSE` allows; CPings (a health check,
//! and a kept connection idle past `ping_interval`); a servlet that reads the body after
//! its head.

mod common;

use common::{Opts, Tether};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A packet from the server: `AB`, the length, the payload.
fn packet(payload: &[u8]) -> Vec<u8> {
    let mut p = b"AB".to_vec();
    p.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    p.extend_from_slice(payload);
    p
}

/// A well-formed answer: 200, `Content-Length`, the body, END_RESPONSE with `reuse`.
fn answer(body: &[u8], reuse: bool) -> Vec<u8> {
    let mut head = vec![4, 0, 200, 0, 2, b'O', b'K', 0, 0, 1, 0xA0, 0x03];
    let len = body.len().to_string();
    head.extend_from_slice(&(len.len() as u16).to_be_bytes());
    head.extend_from_slice(len.as_bytes());
    head.push(0);
    let mut out = packet(&head);
    let mut chunk = vec![3];
    chunk.extend_from_slice(&(body.len() as u16).to_be_bytes());
    chunk.extend_from_slice(body);
    chunk.push(0);
    out.extend(packet(&chunk));
    out.extend(packet(&[5, u8::from(reuse)]));
    out
}

/// Reads one request packet (the FORWARD_REQUEST of a body-less GET).
async fn read_packet(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = [0u8; 4];
    s.read_exact(&mut head).await.ok()?;
    assert_eq!(
        &head[..2],
        &[0x12, 0x34],
        "tether's packets start 0x12 0x34"
    );
    let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
    let mut payload = vec![0; len];
    s.read_exact(&mut payload).await.ok()?;
    Some(payload)
}

/// What a server answers to its `n`th request.
type Reply = fn(usize) -> Vec<u8>;

/// A server that answers every request on a connection with `reply(n)` (n counts the
/// requests it got), and counts its connections; with `close`, it closes the connection
/// after its first answer.
async fn server(reply: Reply, close: bool) -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (conns, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (c, r) = (conns.clone(), requests.clone());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            let r = r.clone();
            tokio::spawn(async move {
                while let Some(payload) = read_packet(&mut s).await {
                    assert_eq!(payload[0], 2, "a FORWARD_REQUEST");
                    let n = r.fetch_add(1, Ordering::SeqCst);
                    if s.write_all(&reply(n)).await.is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    (addr, conns, requests)
}

fn tether(server: SocketAddr) -> Tether {
    Tether::start_with(Opts {
        cluster: format!(
            "    max_attempts: 1\n    ajp: {{}}\n    servers:\n      - {{ name: s1, address: \"{server}\" }}\n"
        ),
        listener_extra: "    http1: engine\n".into(),
        ..Opts::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_answers_fail_the_request_and_nothing_panics() {
    let cases: [(&str, Reply); 4] = [
        ("a wrong magic", |_| b"XY\x00\x02\x05\x01".to_vec()),
        ("a field count that lies", |_| {
            packet(&[4, 0, 200, 0xFF, 0xFF, 0, 3, 0xA0, 0x01, 0, 1, b'x', 0])
        }),
        ("a length past the packet size", |_| {
            let mut p = b"AB\xFF\xF0".to_vec();
            p.extend(vec![4; 100]);
            p
        }),
        ("an unknown message type", |_| packet(&[42])),
    ];
    for (what, reply) in cases {
        let (addr, _, _) = server(reply, false).await;
        let mut t = tether(addr);
        let r = t.client().get("/x", &[]).await.unwrap();
        assert_eq!(r.status, 502, "{what}");
        assert!(t.alive(), "{what}: tether runs on");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_cut_in_its_body_ends_the_clients_connection() {
    let (addr, _, _) = server(
        |_| {
            let mut out = answer(b"0123456789", true);
            // The head and half the body chunk, then the server is gone.
            out.truncate(30);
            out
        },
        true,
    )
    .await;
    let mut t = tether(addr);
    let r = t.client().get("/x", &[]).await;
    if let Ok(r) = r {
        assert_ne!(
            r.body, b"0123456789",
            "a cut body is not passed off as whole"
        );
    }
    assert!(t.alive());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_longer_or_shorter_than_its_length_is_never_passed_on_as_framed() {
    // Content-Length 5, and 10 bytes of body: the client must not take the rest for its
    // next answer.
    let (addr, _, _) = server(
        |_| {
            let mut out = answer(b"0123456789", true);
            let at = out.windows(2).position(|w| w == b"10").unwrap();
            out[at..at + 2].copy_from_slice(b"05");
            out
        },
        false,
    )
    .await;
    let t = tether(addr);
    let r = t.client().get("/x", &[]).await.unwrap();
    assert_eq!(r.status, 502, "longer than its length: {:?}", r.body);
    // Content-Length 20, and 10 bytes: the client is not left waiting for the rest.
    let (addr, _, _) = server(
        |_| {
            let mut out = answer(b"0123456789", true);
            let at = out.windows(2).position(|w| w == b"10").unwrap();
            out[at..at + 2].copy_from_slice(b"20");
            out
        },
        false,
    )
    .await;
    let t = tether(addr);
    let started = std::time::Instant::now();
    let r = t.client().get("/x", &[]).await;
    assert!(
        !matches!(&r, Ok(r) if r.body.len() == 20),
        "shorter than its length: {r:?}"
    );
    // The connection is cut at once, not left for the client to wait out.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_is_reused_exactly_when_end_response_allows_it() {
    let (addr, conns, requests) = server(|_| answer(b"kept", true), false).await;
    let t = tether(addr);
    let mut client = t.client();
    for _ in 0..5 {
        let r = client.get("/x", &[]).await.unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"kept"[..]));
    }
    assert_eq!(requests.load(Ordering::SeqCst), 5);
    assert_eq!(
        conns.load(Ordering::SeqCst),
        1,
        "reuse: 1 was said each time"
    );

    let (addr, conns, _) = server(|_| answer(b"closed", false), false).await;
    let t = tether(addr);
    let mut client = t.client();
    for _ in 0..3 {
        let r = client.get("/x", &[]).await.unwrap();
        assert_eq!(r.status, 200);
    }
    assert_eq!(
        conns.load(Ordering::SeqCst),
        3,
        "reuse: 0, a new connection each time"
    );
}

/// A server that answers a CPing with a CPong when `answers`, or reads it and says nothing
/// (a Tomcat whose threads are all stuck, or stopped with SIGSTOP).
async fn pinged(answers: bool) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                while let Some(payload) = read_packet(&mut s).await {
                    if payload == [10] && answers {
                        let _ = s.write_all(&packet(&[9])).await;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cping_health_check_marks_down_a_server_that_gives_no_cpong() {
    let (alive, stuck) = (pinged(true).await, pinged(false).await);
    let t = Tether::start_with(Opts {
        cluster: format!(
            "    ajp: {{}}\n    health_check: {{ kind: cping, interval: 300ms, timeout: 200ms, rise: 1, fall: 2 }}\n    servers:\n\
             \x20     - {{ name: alive, address: \"{alive}\" }}\n      - {{ name: stuck, address: \"{stuck}\" }}\n"
        ),
        listener_extra: "    http1: engine\n".into(),
        log: Some("info"),
        ..Opts::default()
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !t.log().contains("server stuck: health check failed")
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let log = t.log();
    assert!(
        log.contains("server stuck: health check failed 2 times"),
        "{log}"
    );
    assert!(!log.contains("server alive: health check failed"), "{log}");
}

/// A server that answers its head first and then reads the request's body (a servlet that
/// commits its answer before it reads): it asks with `GET_BODY_CHUNK` until the body's
/// end, and answers how many bytes it got.
async fn reads_after_its_head() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Some(forward) = read_packet(&mut s).await else {
                    return;
                };
                assert_eq!(forward[0], 2, "a FORWARD_REQUEST");
                // The first body packet, which follows the request unasked.
                let mut got = read_packet(&mut s).await.unwrap().len().saturating_sub(2);
                let head = [4, 0, 200, 0, 2, b'O', b'K', 0, 0, 0];
                s.write_all(&packet(&head)).await.unwrap();
                loop {
                    s.write_all(&packet(&[6, 0x1F, 0xFA])).await.unwrap();
                    let data = read_packet(&mut s).await.unwrap().len().saturating_sub(2);
                    if data == 0 {
                        break;
                    }
                    got += data;
                }
                let text = format!("got {got}");
                let mut chunk = vec![3];
                chunk.extend_from_slice(&(text.len() as u16).to_be_bytes());
                chunk.extend_from_slice(text.as_bytes());
                chunk.push(0);
                let mut out = packet(&chunk);
                out.extend(packet(&[5, 0]));
                let _ = s.write_all(&out).await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_reads_the_body_after_its_head_gets_all_of_it() {
    let addr = reads_after_its_head().await;
    let t = Tether::start_with(Opts {
        cluster: format!(
            "    ajp: {{}}\n    servers:\n      - {{ name: s1, address: \"{addr}\" }}\n"
        ),
        // AJP is tether's own front ends' (the suite's second pass puts listeners that
        // do not say on Pingora's proxy).
        listener_extra: "    http1: engine\n    http2: engine\n    h2c: true\n".into(),
        ..Opts::default()
    });
    let dir = common::scratch_dir("ajp-late-body");
    let file = dir.join("body.bin");
    std::fs::write(&file, vec![b'x'; 20_000]).unwrap();
    for version in ["--http1.1", "--http2-prior-knowledge"] {
        let out = std::process::Command::new("curl")
            .args(["-s", "--max-time", "10", version])
            .args(["--data-binary", &format!("@{}", file.display())])
            .arg(format!("http://{}/x", t.addr))
            .output()
            .expect("curl");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "got 20000",
            "{version}"
        );
    }
}

/// A server that answers CPings and requests (`answer(b"ok", true)`), and counts the
/// CPings.
async fn counts_pings() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let pings = Arc::new(AtomicUsize::new(0));
    let counted = pings.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                while let Some(payload) = read_packet(&mut s).await {
                    let reply = match payload.first() {
                        Some(10) => {
                            counted.fetch_add(1, Ordering::SeqCst);
                            packet(&[9])
                        }
                        _ => answer(b"ok", true),
                    };
                    if s.write_all(&reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, pings)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_connection_idle_past_ping_interval_is_pinged_before_it_is_used() {
    let (addr, pings) = counts_pings().await;
    let t = Tether::start_with(Opts {
        cluster: format!(
            "    ajp: {{ ping_interval: 300ms }}\n    servers:\n      - {{ name: s1, address: \"{addr}\" }}\n"
        ),
        listener_extra: "    http1: engine\n".into(),
        ..Opts::default()
    });
    let mut client = t.client();
    for _ in 0..3 {
        assert_eq!(client.get("/x", &[]).await.unwrap().status, 200);
    }
    assert_eq!(
        pings.load(Ordering::SeqCst),
        0,
        "a new connection, then kept ones used at once"
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(client.get("/x", &[]).await.unwrap().status, 200);
    assert_eq!(
        pings.load(Ordering::SeqCst),
        1,
        "idle past the interval: asked first"
    );
}
