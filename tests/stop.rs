//! What a stop does to the connections it finds, on both HTTP/1 front ends: at a graceful
//! stop a new connection's first request is still answered (its client cannot know the
//! process stops, and would not retry it) while a kept-alive connection that waits for its
//! next request closes; `SIGINT` ends the process at once, whatever its listeners hold.

mod common;

use common::{free_port, server_line, tomcats, Opts, Tether};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";

/// Reads one answer with a `Content-Length` body: its head, lower-cased.
fn head(conn: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            other => panic!("closed in a head ({other:?}): {got:?}"),
        }
    }
    let head = String::from_utf8(got).unwrap().to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    conn.read_exact(&mut vec![0; length]).unwrap();
    head
}

fn signal(t: &Tether, signal: i32) {
    // SAFETY: kill(2) on the process this test started, with a valid signal number.
    assert_eq!(unsafe { libc::kill(t.pid() as i32, signal) }, 0);
}

fn exits_within(t: &mut Tether, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < within {
        if !t.alive() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_a_graceful_stop_a_new_connections_request_is_answered_and_a_kept_one_closes() {
    let sims = tomcats(1).await;
    for front in ["engine", "proxy"] {
        let mut t = Tether::start_with(Opts {
            cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
            listener_extra: format!("    http1: {front}\n"),
            grace: 10,
            ..Opts::default()
        });
        let mut kept = TcpStream::connect(t.addr).unwrap();
        kept.write_all(GET).unwrap();
        assert!(head(&mut kept).starts_with("http/1.1 200"), "{front}");
        // Accepted, its request not sent yet.
        let mut new = TcpStream::connect(t.addr).unwrap();
        std::thread::sleep(Duration::from_millis(300));

        signal(&t, libc::SIGTERM);
        // Well after the stop began: the engine closes its waiting connections at once,
        // Pingora's proxy a second later.
        std::thread::sleep(Duration::from_millis(200));
        new.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        new.write_all(GET).unwrap();
        let answer = head(&mut new);
        assert!(answer.starts_with("http/1.1 200"), "{front}: {answer}");
        assert!(
            answer.contains("connection: close\r\n"),
            "{front}: {answer}"
        );
        assert!(matches!(new.read(&mut [0u8; 1]), Ok(0)), "{front}");
        kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let closed = kept.read(&mut [0u8; 1]);
        assert!(
            matches!(closed, Ok(0)),
            "{front}: the kept connection closes at the stop: {closed:?}"
        );
        // Its last connection closed, the process ends before its grace period.
        let exited = exits_within(&mut t, Duration::from_secs(5));
        assert!(exited.is_some(), "{front}: still running\n{}", t.log());
    }
}

/// Listeners on many threads each, busy with requests: a `SIGINT` ends the process at once,
/// on either front end, with no accept failing on the way. (Pingora's own quick stop shuts
/// a listener's threads down one by one, and an accept loop on a thread still busy spins
/// on the reactor of the thread that built its socket, gone: it happens to some runs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_ends_the_process_at_once_while_clients_are_served() {
    let sims = tomcats(1).await;
    for front in ["engine", "proxy", "proxy", "proxy"] {
        let addresses: Vec<SocketAddr> = (0..8)
            .map(|_| SocketAddr::from(([127, 0, 0, 1], free_port())))
            .collect();
        let more: String = addresses
            .iter()
            .enumerate()
            .map(|(i, a)| {
                format!("  - name: more{i}\n    address: \"{a}\"\n    cluster: shop\n    http1: {front}\n")
            })
            .collect();
        let mut t = Tether::start_with(Opts {
            cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
            listener_extra: format!("    http1: {front}\n"),
            extra_listeners: more,
            grace: 10,
            threads: 4,
            ..Opts::default()
        });
        let stop = Arc::new(AtomicBool::new(false));
        let load: Vec<_> = addresses
            .iter()
            .map(|&a| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let Ok(mut c) = TcpStream::connect(a) else {
                            return;
                        };
                        let _ = c.write_all(GET);
                        let _ = c.read(&mut [0u8; 512]);
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        signal(&t, libc::SIGINT);
        let exited = exits_within(&mut t, Duration::from_secs(5));
        stop.store(true, Ordering::Relaxed);
        let log = t.log();
        assert!(exited.is_some(), "{front}: still running\n{log}");
        assert!(!log.contains("Accept() failed"), "{front}:\n{log}");
        for l in load {
            l.join().unwrap();
        }
    }
}
