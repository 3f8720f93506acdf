//! Clients too slow to send a body or to read a response: they hold no
//! application-server connection for long, get 408 (or a reset) soon after the grace, and
//! an honest client above the minimum rates still gets through.

mod common;

use common::{server_line, tomcats, Opts, Tether};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tether::cli::sim::TomcatSim;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn start(sims: &[TomcatSim], limits: &str) -> Tether {
    Tether::start_with(Opts {
        cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
        listener_extra: if limits.is_empty() {
            String::new()
        } else {
            format!("    limits: {{ {limits} }}\n")
        },
        ..Opts::default()
    })
}

/// The status line's code of what `s` answers within `limit` (0: closed without an answer,
/// or nothing in time), and how long it took.
async fn answer(s: &mut tokio::net::tcp::OwnedReadHalf, limit: Duration) -> (u16, Duration) {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while start.elapsed() < limit {
        match tokio::time::timeout(limit - start.elapsed(), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => {
                got.extend_from_slice(&buf[..n]);
                if got.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
        }
    }
    let code = std::str::from_utf8(&got)
        .ok()
        .and_then(|t| t.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, start.elapsed())
}

/// A client that sends `head`, then `piece` once a second, until it is answered: the
/// answer's status and when it came.
async fn trickle(
    addr: std::net::SocketAddr,
    head: &'static [u8],
    piece: &'static [u8],
) -> (u16, Duration) {
    let s = TcpStream::connect(addr).await.unwrap();
    let (mut r, mut w) = s.into_split();
    w.write_all(head).await.unwrap();
    let sender = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if w.write_all(piece).await.is_err() {
                return;
            }
        }
    });
    let out = answer(&mut r, Duration::from_secs(40)).await;
    sender.abort();
    out
}

/// 200 slow uploads at once, one piece a second: the most server connections open at any
/// time, and every answer with its time.
async fn two_hundred(
    t: &Tether,
    sim: &TomcatSim,
    head: &'static [u8],
    piece: &'static [u8],
) -> (u64, Vec<(u16, Duration)>) {
    let most = Arc::new(AtomicU64::new(0));
    let watch = {
        let (most, sim) = (most.clone(), sim.clone());
        tokio::spawn(async move {
            loop {
                most.fetch_max(sim.open_connections(), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let clients: Vec<_> = (0..200)
        .map(|_| tokio::spawn(trickle(t.addr, head, piece)))
        .collect();
    let mut answers = Vec::new();
    for c in clients {
        answers.push(c.await.unwrap());
    }
    watch.abort();
    (most.load(Ordering::SeqCst), answers)
}

fn check_all_refused(what: &str, most: u64, answers: &[(u16, Duration)]) {
    let slowest = answers.iter().map(|a| a.1).max().unwrap();
    let refused = answers.iter().filter(|a| a.0 == 408).count();
    println!("{what}: {refused}/200 answered 408, the last after {slowest:?}; at most {most} server connections open");
    assert!(most <= 5, "{what}: {most} server connections held");
    assert!(
        answers.iter().all(|a| a.0 == 408 || a.0 == 0),
        "{what}: every client is refused or closed: {answers:?}"
    );
    assert!(refused >= 190, "{what}: 408, not a silent close: {refused}");
    // The default grace is 10 s; a few seconds more for 200 clients on a busy machine.
    assert!(slowest < Duration::from_secs(16), "{what}: {slowest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_slow_uploads_hold_no_server_connection_and_get_408() {
    let sims = tomcats(1).await;
    let t = start(&sims, "");
    let (most, answers) = two_hundred(
        &t,
        &sims[0],
        b"POST /upload HTTP/1.1\r\nHost: t.example\r\nContent-Length: 10000000\r\n\r\n",
        b"x",
    )
    .await;
    check_all_refused("Content-Length: 10000000", most, &answers);
    assert_eq!(sims[0].requests(), 0, "no request reached the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_slow_chunked_uploads_hold_no_server_connection_and_get_408() {
    let sims = tomcats(1).await;
    let t = start(&sims, "");
    let (most, answers) = two_hundred(
        &t,
        &sims[0],
        b"POST /upload HTTP/1.1\r\nHost: t.example\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"1\r\nx\r\n",
    )
    .await;
    check_all_refused("chunked", most, &answers);
    assert_eq!(sims[0].requests(), 0, "no request reached the server");
}

/// Sends `total` bytes of a `Content-Length` body at `rate` bytes a second (in pieces of
/// `rate / 10` every 100 ms), then reads the answer.
async fn upload(addr: std::net::SocketAddr, total: usize, rate: usize) -> u16 {
    let s = TcpStream::connect(addr).await.unwrap();
    let (mut r, mut w) = s.into_split();
    let head = format!("POST /upload HTTP/1.1\r\nHost: t.example\r\nContent-Length: {total}\r\nConnection: close\r\n\r\n");
    w.write_all(head.as_bytes()).await.unwrap();
    let piece = vec![b'x'; rate / 10];
    let mut sent = 0;
    while sent < total {
        let n = piece.len().min(total - sent);
        if w.write_all(&piece[..n]).await.is_err() {
            break;
        }
        sent += n;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    answer(&mut r, Duration::from_secs(30)).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honest_uploads_above_the_rate_get_through_and_slower_ones_do_not() {
    let sims = tomcats(1).await;
    // 10 kB/s after 1 s: a 150 kB body (streamed past the 60 KiB read first) at 40 kB/s
    // is honest; at 4 kB/s it is not.
    let t = start(
        &sims,
        "request_body_min_rate: 10000, request_body_grace: 1s",
    );
    assert_eq!(
        upload(t.addr, 150_000, 40_000).await,
        200,
        "an honest slow upload"
    );
    assert_eq!(sims[0].requests(), 1);
    let begun = Instant::now();
    assert_eq!(upload(t.addr, 150_000, 4_000).await, 408, "below the rate");
    assert!(begun.elapsed() < Duration::from_secs(10));
    assert_eq!(
        sims[0].requests(),
        1,
        "the slow one never reached the server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_slows_down_while_it_streams_is_cut_and_its_server_request_abandoned() {
    let sims = tomcats(1).await;
    let t = start(
        &sims,
        "request_body_min_rate: 50000, request_body_grace: 2s",
    );
    let s = TcpStream::connect(t.addr).await.unwrap();
    let (mut r, mut w) = s.into_split();
    w.write_all(b"POST /upload HTTP/1.1\r\nHost: t.example\r\nContent-Length: 10000000\r\n\r\n")
        .await
        .unwrap();
    // 100 kB at once: past the buffer, so the server is connected and the body streams.
    w.write_all(&vec![b'x'; 100_000]).await.unwrap();
    let sender = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if w.write_all(b"x").await.is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while sims[0].open_connections() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        sims[0].open_connections(),
        1,
        "the body streams to the server"
    );
    // 2 s of grace and 2 s earned by 100 kB, then one byte a second falls behind.
    let (code, took) = answer(&mut r, Duration::from_secs(20)).await;
    sender.abort();
    println!("a stalled stream was answered {code} after {took:?}");
    assert_eq!(code, 408);
    assert!(took < Duration::from_secs(10), "{took:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while sims[0].open_connections() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        sims[0].open_connections(),
        0,
        "the server's request was abandoned"
    );
}

/// Reads `GET /bytes/N` through a 4 KiB receive buffer at `rate` bytes a second (0: at
/// once): bytes read, and whether the connection ended (closed or reset) within `limit`.
async fn read_response(
    addr: std::net::SocketAddr,
    n: usize,
    rate: usize,
    limit: Duration,
) -> (usize, bool) {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut s = sock.connect(addr).await.unwrap();
    let req = format!("GET /bytes/{n} HTTP/1.1\r\nHost: t.example\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let start = Instant::now();
    let mut total = 0;
    let mut buf = vec![0u8; if rate == 0 { 65536 } else { (rate / 10).max(1) }];
    while start.elapsed() < limit {
        match tokio::time::timeout(limit - start.elapsed(), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (total, true),
            Ok(Ok(got)) => total += got,
            Err(_) => break,
        }
        if rate > 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    (total, false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_below_the_send_rate_is_reset_and_a_fast_one_reads_it_all() {
    let sims = tomcats(1).await;
    // 100 kB/s: a 64 KiB write may take 0.65 s, and never less than the 1 s grace.
    let t = start(&sims, "send_min_rate: 100000, send_grace: 1s");
    let begun = Instant::now();
    let (read, ended) = read_response(t.addr, 20_000_000, 2_000, Duration::from_secs(30)).await;
    println!(
        "a 2 kB/s reader read {read} bytes; the connection ended after {:?}",
        begun.elapsed()
    );
    assert!(
        ended,
        "tether ended the connection of a reader below send_min_rate"
    );
    assert!(read < 20_000_000);
    assert!(
        begun.elapsed() < Duration::from_secs(15),
        "{:?}",
        begun.elapsed()
    );
    let (read, ended) = read_response(t.addr, 20_000_000, 0, Duration::from_secs(30)).await;
    assert!(ended);
    assert!(
        read > 20_000_000,
        "a fast reader gets the whole response: {read}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_expects_100_continue_gets_it_from_tether_before_its_body() {
    let sims = tomcats(1).await;
    let t = start(&sims, "");
    for length in [1_000usize, 200_000] {
        let s = TcpStream::connect(t.addr).await.unwrap();
        let (mut r, mut w) = s.into_split();
        let head = format!(
            "POST /upload HTTP/1.1\r\nHost: t.example\r\nContent-Length: {length}\r\nExpect: 100-continue\r\n\r\n"
        );
        w.write_all(head.as_bytes()).await.unwrap();
        // Nothing of the body is sent before the 100 (as curl does for large bodies).
        let (code, took) = answer(&mut r, Duration::from_secs(5)).await;
        assert_eq!(code, 100, "{length} bytes: tether invites the body");
        assert!(took < Duration::from_secs(2), "{took:?}");
        w.write_all(&vec![b'x'; length]).await.unwrap();
        let (code, _) = answer(&mut r, Duration::from_secs(5)).await;
        assert_eq!(code, 200, "{length} bytes");
        let headers = sims[0].last_request_headers();
        assert!(
            headers.iter().all(|(n, _)| n != "expect"),
            "the server gets the body without being asked: {headers:?}"
        );
    }
}
