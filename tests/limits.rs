//! Hostile clients and broken backends against a listener's limits, over real sockets:
//! pipelining, slow heads (slowloris), idle keep-alive, connection caps, slow bodies,
//! slow readers, endless 1xx and a server that does not answer in time.

mod common;

use common::{server_line, tomcats, Opts, Tether};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// tether in front of `servers` (YAML server lines), with `limits` (YAML, indented 6)
/// and more cluster settings (indented 4).
fn start(servers: &str, limits: &str, cluster_extra: &str) -> Tether {
    Tether::start_with(Opts {
        cluster: format!("{cluster_extra}    servers:\n{servers}"),
        metrics: true,
        listener_extra: if limits.is_empty() {
            String::new()
        } else {
            format!("    limits:\n{limits}")
        },
        ..Opts::default()
    })
}

/// Reads from `s` until it closes or `limit` passes; returns what came and whether it closed.
async fn read_until_closed(s: &mut TcpStream, limit: Duration) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (out, true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, false),
        }
    }
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_all_answered_in_order() {
    let sims = tomcats(1).await;
    let t = start(&server_line(&sims[0], ""), "", "");
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(
        b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let (out, closed) = read_until_closed(&mut s, Duration::from_secs(5)).await;
    assert!(closed, "closed after the third (Connection: close)");
    assert_eq!(
        count(&out, b"HTTP/1.1 200"),
        3,
        "{}",
        String::from_utf8_lossy(&out)
    );
    assert_eq!(sims[0].requests(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_idle_connections_and_too_many_connections_are_closed() {
    let sims = tomcats(1).await;
    let t = start(
        &server_line(&sims[0], ""),
        "      request_head_timeout: 1s\n      keepalive_timeout: 1s\n      max_connections: 20\n",
        "",
    );
    // Slowloris: one header byte every 200 ms never completes a head within 1 s.
    let mut slow = TcpStream::connect(t.addr).await.unwrap();
    let start = Instant::now();
    let head = b"GET / HTTP/1.1\r\nHost: a\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut closed_at = None;
    for b in head.iter() {
        if slow.write_all(&[*b]).await.is_err() {
            closed_at = Some(start.elapsed());
            break;
        }
        let mut probe = [0u8; 1];
        if let Ok(Ok(0)) =
            tokio::time::timeout(Duration::from_millis(200), slow.read(&mut probe)).await
        {
            closed_at = Some(start.elapsed());
            break;
        }
    }
    let closed_at = closed_at.expect("the slow head was cut off");
    assert!(closed_at < Duration::from_secs(4), "{closed_at:?}");

    // An idle keep-alive connection is closed after keepalive_timeout.
    let mut idle = TcpStream::connect(t.addr).await.unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let (out, closed) = read_until_closed(&mut idle, Duration::from_secs(4)).await;
    assert!(out.starts_with(b"HTTP/1.1 200"));
    assert!(closed, "the idle connection was closed");

    // More than max_connections open at once: the extra ones are closed at once.
    let mut held = Vec::new();
    for _ in 0..20 {
        held.push(TcpStream::connect(t.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut extra = TcpStream::connect(t.addr).await.unwrap();
    let _ = extra.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").await;
    let (out, closed) = read_until_closed(&mut extra, Duration::from_secs(2)).await;
    assert!(
        closed && out.is_empty(),
        "{}",
        String::from_utf8_lossy(&out)
    );
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ok = t.client().get("/", &[]).await.unwrap();
    assert_eq!(ok.status, 200, "served again once connections closed");
    let scrape = common::scrape(t.metrics.unwrap()).await;
    for reason in ["request_head_timeout", "max_connections"] {
        assert!(
            scrape.contains(&format!(
                "tether_client_closed_total{{listener=\"web\",reason=\"{reason}\"}}"
            )),
            "{reason} counted:\n{scrape}"
        );
    }
}

/// A server that answers `respond` after reading one request head; counts its connections.
async fn raw_server(
    respond: impl Fn() -> Vec<(Duration, Vec<u8>)> + Send + Sync + 'static,
) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let respond = std::sync::Arc::new(respond);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let respond = respond.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                for (wait, bytes) in respond() {
                    tokio::time::sleep(wait).await;
                    if s.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
        }
    });
    addr
}

fn raw_line(name: &str, addr: SocketAddr) -> String {
    format!("      - {{ name: {name}, address: \"{addr}\" }}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_too_slow_gets_504_and_endless_1xx_gets_502() {
    let slow = raw_server(|| {
        vec![(
            Duration::from_secs(5),
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec(),
        )]
    })
    .await;
    let t = start(
        &raw_line("slow", slow),
        "",
        "    read_timeout: 500ms\n    max_attempts: 1\n",
    );
    let r = t.client().get("/", &[]).await.unwrap();
    assert_eq!(r.status, 504, "{}", r.body_str());
    assert_eq!(r.header("connection"), Some("close"));

    let chatty = raw_server(|| {
        (0..100)
            .map(|_| {
                (
                    Duration::ZERO,
                    b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n".to_vec(),
                )
            })
            .collect()
    })
    .await;
    let t = start(&raw_line("chatty", chatty), "", "    max_attempts: 1\n");
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let (out, _) = read_until_closed(&mut s, Duration::from_secs(5)).await;
    let hints = count(&out, b"HTTP/1.1 103");
    assert!(
        hints <= 16,
        "at most 16 interim answers relayed, got {hints}"
    );
    assert!(
        count(&out, b"HTTP/1.1 502") == 1,
        "then a 502: {}",
        String::from_utf8_lossy(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_never_reach_the_server_and_get_408() {
    let sims = tomcats(1).await;
    let t = start(
        &server_line(&sims[0], ""),
        "      request_body_timeout: 1s\n",
        "",
    );
    let before = sims[0].connections();
    // 20 clients sending a 100-byte body one byte every 200 ms.
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let addr = t.addr;
        tasks.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n")
                .await
                .unwrap();
            for _ in 0..100 {
                if s.write_all(b"x").await.is_err() {
                    break;
                }
                let mut b = [0u8; 256];
                if let Ok(Ok(n)) =
                    tokio::time::timeout(Duration::from_millis(200), s.read(&mut b)).await
                {
                    return String::from_utf8_lossy(&b[..n]).into_owned();
                }
            }
            String::new()
        }));
    }
    // Meanwhile the server holds no connection for them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        sims[0].connections(),
        before,
        "no upstream connection while buffering"
    );
    for task in tasks {
        let answer = task.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    }
    assert_eq!(sims[0].requests(), 0);
    // A body that arrives in time is buffered and sent whole.
    let mut c = t.client();
    let r = c.request("POST", "/", &[], b"hello world").await.unwrap();
    assert_eq!(r.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_a_large_response_is_closed() {
    let big = raw_server(|| {
        let body = vec![b'x'; 64 * 1024 * 1024];
        let mut resp =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        resp.extend_from_slice(&body);
        vec![(Duration::ZERO, resp)]
    })
    .await;
    let t = start(&raw_line("big", big), "      send_timeout: 1s\n", "");
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    // Read a little, then stop reading for a while.
    let mut b = [0u8; 1024];
    let _ = s.read(&mut b).await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    // tether gave up on us: the rest of the stream ends well before 64 MiB.
    let (out, closed) = read_until_closed(&mut s, Duration::from_secs(10)).await;
    assert!(closed, "closed");
    assert!(out.len() < 60 * 1024 * 1024, "read {} bytes", out.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_headers_get_431_and_do_not_hold_memory() {
    let sims = tomcats(1).await;
    let t = start(&server_line(&sims[0], ""), "", "");
    // One client: a head that never ends is answered 431 once it passes 32 KiB.
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n").await.unwrap();
    let line = format!("X-Filler: {}\r\n", "a".repeat(1000));
    for _ in 0..40 {
        if s.write_all(line.as_bytes()).await.is_err() {
            break;
        }
    }
    let (out, closed) = read_until_closed(&mut s, Duration::from_secs(5)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    assert!(text.contains("Connection: close") && closed, "{text}");

    // 300 clients each trying to send 1 MiB of unfinished head.
    let before = t.rss();
    let mut tasks = Vec::new();
    for _ in 0..300 {
        let addr = t.addr;
        let line = line.clone();
        tasks.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n").await;
            for _ in 0..1000 {
                if s.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
            s
        }));
    }
    let mut held = Vec::new();
    for task in tasks {
        held.push(task.await.unwrap());
    }
    let during = t.rss();
    drop(held);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = t.rss();
    let mib = |b: u64| b as f64 / 1048576.0;
    eprintln!(
        "RSS: before {:.1} MiB, with 300 endless heads {:.1} MiB, after {:.1} MiB",
        mib(before),
        mib(during),
        mib(after)
    );
    // Unbounded, Pingora's parser would hold up to 1 MiB for each: ~300 MiB.
    assert!(
        during < before + 60 * 1048576,
        "300 unfinished heads held {:.1} MiB",
        mib(during - before)
    );
    let ok = t.client().get("/", &[]).await.unwrap();
    assert_eq!(ok.status, 200);
}
