//! The soak's faults, one every period from a rotation: a reload with changed weights, a
//! Tomcat killed and restarted, a binary upgrade of instance b, a Redis restart, a drain
//! and activate, a WebSphere clone killed and restarted, and a burst of slowloris clients
//! and oversized heads. Each one says in the truth what it disturbs, for how long.

use crate::fleet::Fleet;
use crate::truth::{Kind, Stats, Truth};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const ROTATION: [&str; 7] = [
    "reload",
    "kill tomcat",
    "upgrade b",
    "restart redis",
    "drain",
    "kill websphere",
    "hostile burst",
];

/// How long a killed server stays counted as down after its restart: tether's next health
/// check (every 1 s) and `recover_after` (2 s), with room to spare.
const RECOVERY: Duration = Duration::from_secs(5);

/// Runs fault `n` of the rotation, for at most `span` (about half the period): what was
/// done, for the event log.
pub async fn run(n: usize, fleet: &Fleet, truth: &Truth, stats: &Stats, span: Duration) -> String {
    let which = ROTATION[n % ROTATION.len()];
    match which {
        "reload" => {
            let weights = [[3, 1, 1], [1, 3, 1], [1, 1, 3], [1, 1, 1]][(n / ROTATION.len()) % 4];
            fleet.reweigh(&weights);
            format!("reload, tomcat weights {weights:?}")
        }
        "kill tomcat" => {
            let sim = &fleet.tomcats[(n / ROTATION.len()) % fleet.tomcats.len()];
            killed(truth, sim.name(), span, sim.stop(), sim.restart()).await
        }
        "kill websphere" => {
            let sim = &fleet.clones[(n / ROTATION.len()) % fleet.clones.len()];
            killed(truth, sim.name(), span, sim.stop(), sim.restart()).await
        }
        "upgrade b" => {
            let b = &fleet.instances[1];
            let before = b.pid();
            let r = tokio::task::block_in_place(|| b.upgrade());
            match r {
                Ok(_) => format!("b upgraded (pid {before:?} → {:?})", b.pid()),
                Err(e) => {
                    stats.fault_failed.fetch_add(1, Relaxed);
                    stats.note(format!("upgrade of b failed: {e}"));
                    format!("b upgrade FAILED: {e}")
                }
            }
        }
        "restart redis" => {
            fleet.restart_redis(span.min(Duration::from_secs(5))).await;
            format!(
                "redis killed, restarted after {:?}",
                span.min(Duration::from_secs(5))
            )
        }
        "drain" => {
            let sim = &fleet.tomcats[(n / ROTATION.len() + 1) % fleet.tomcats.len()];
            let path = format!("/clusters/tomcat/servers/{}", sim.name());
            for i in &fleet.instances {
                let status = i.admin("POST", &format!("{path}/drain")).await;
                if status != 200 {
                    stats.fault_failed.fetch_add(1, Relaxed);
                    stats.note(format!("drain on {}: HTTP {status}", i.name));
                }
            }
            // No new session may go there from when both instances drain it until the
            // first is told to take them again.
            let w = truth.open(Kind::Draining, sim.name());
            tokio::time::sleep(span).await;
            truth.close(w, Duration::ZERO);
            for i in &fleet.instances {
                let status = i.admin("POST", &format!("{path}/activate")).await;
                if status != 200 {
                    stats.fault_failed.fetch_add(1, Relaxed);
                    stats.note(format!("activate on {}: HTTP {status}", i.name));
                }
            }
            format!("{} drained for {span:?}, activated", sim.name())
        }
        _ => {
            let w = truth.open(Kind::Burst, fleet.instances[0].name);
            let said = hostile_burst(fleet.instances[0].plain, stats).await;
            // Until tether has closed the last of them.
            truth.close(w, Duration::from_secs(1));
            said
        }
    }
}

/// A server killed (`stop`), down for `span`, then started again (`restart`): the truth
/// counts it down until tether has seen it back.
async fn killed(
    truth: &Truth,
    name: &str,
    span: Duration,
    stop: impl std::future::Future<Output = ()>,
    restart: impl std::future::Future<Output = std::io::Result<()>>,
) -> String {
    let w = truth.open(Kind::Down, name);
    stop.await;
    tokio::time::sleep(span).await;
    restart.await.expect("restart a killed server");
    truth.close(w, RECOVERY);
    format!("{name} killed, restarted after {span:?}")
}

/// 200 slowloris clients (a head never finished, one byte a second) and 20 heads over
/// `max_request_head` (16 KiB) against instance a: each slow one must be closed by
/// `request_head_timeout` (5 s, checked with 3 s to spare), each large one answered 431.
async fn hostile_burst(addr: SocketAddr, stats: &Stats) -> String {
    let slow: Vec<_> = (0..200).map(|_| tokio::spawn(slowloris(addr))).collect();
    let big: Vec<_> = (0..20).map(|_| tokio::spawn(oversized(addr))).collect();
    let (mut slow_ok, mut big_ok) = (0, 0);
    for s in slow {
        match s.await.unwrap() {
            Ok(()) => slow_ok += 1,
            Err(e) => {
                stats.fault_failed.fetch_add(1, Relaxed);
                stats.note(format!("slowloris: {e}"));
            }
        }
    }
    for b in big {
        match b.await.unwrap() {
            Ok(()) => big_ok += 1,
            Err(e) => {
                stats.fault_failed.fetch_add(1, Relaxed);
                stats.note(format!("oversized head: {e}"));
            }
        }
    }
    format!("hostile burst on a: {slow_ok}/200 slowloris closed in time, {big_ok}/20 oversized heads got 431")
}

async fn slowloris(addr: SocketAddr) -> Result<(), String> {
    let start = Instant::now();
    let mut c = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    c.write_all(b"GET /slow HTTP/1.1\r\nHost: soak\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 512];
    loop {
        if start.elapsed() > Duration::from_secs(8) {
            return Err(format!("still open after {:?}", start.elapsed()));
        }
        // A byte a second; the connection's end shows as a read of 0 or an error.
        match tokio::time::timeout(Duration::from_secs(1), c.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Ok(()),
            Ok(Ok(_)) => continue,
            Err(_) => {
                if c.write_all(b"X").await.is_err() {
                    return Ok(());
                }
            }
        }
    }
}

async fn oversized(addr: SocketAddr) -> Result<(), String> {
    let mut head = b"GET /big HTTP/1.1\r\nHost: soak\r\nX-Big: ".to_vec();
    head.resize(head.len() + 32 * 1024, b'a');
    head.extend_from_slice(b"\r\n\r\n");
    let r = tether::cli::sim::send_raw(addr, &head)
        .await
        .map_err(|e| e.to_string())?;
    if r.status == 431 {
        Ok(())
    } else {
        Err(format!("HTTP {}", r.status))
    }
}
