//! The soak: a two-instance fleet on one Redis in front of simulated Tomcat and
//! WebSphere clusters, under steady load of sticky sessions over HTTP/1.1, TLS and HTTP/2,
//! with a fault from a rotation every period; every answer checked (status, the session's
//! server, the session kept, `$WSFO` only on failover, no new session on a draining
//! server). It samples requests, failures, misroutes, p99, RSS and open fds over time.
//!
//! `bench/soak --minutes 60` runs it for an hour (`SOAK_MINUTES`) and plots what it writes
//! (`SOAK_OUT`); under `cargo test` it runs every fault of the rotation once, 8 s apart.
//! Instance b is the one upgraded; a runs from start to end, so a's RSS and fds are the
//! ones that must stay flat.

#[path = "../common/mod.rs"]
mod common;

mod clients;
mod faults;
mod fleet;
mod report;
mod truth;
mod users;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use truth::{Stats, Truth};

fn env_f64(name: &str) -> Option<f64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_fleet_under_faults_loses_nothing_and_misroutes_nothing() {
    let full = env_f64("SOAK_MINUTES");
    let period = Duration::from_secs_f64(env_f64("SOAK_PERIOD_S").unwrap_or(if full.is_some() {
        30.0
    } else {
        8.0
    }));
    // The first period is the warm-up; then one fault a period.
    let length = match full {
        Some(m) => Duration::from_secs_f64(m * 60.0),
        None => period * (faults::ROTATION.len() as u32 + 1),
    };
    let sample = Duration::from_secs_f64(env_f64("SOAK_SAMPLE_S").unwrap_or(if full.is_some() {
        10.0
    } else {
        2.0
    }));
    let per_kind = env_f64("SOAK_USERS").unwrap_or(4.0) as usize;
    let pace = Duration::from_millis(env_f64("SOAK_PACE_MS").unwrap_or(20.0) as u64);
    let out = std::env::var("SOAK_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| common::scratch_dir("soak-out"));
    std::fs::create_dir_all(&out).unwrap();

    let fleet = Arc::new(fleet::Fleet::start(common::scratch_dir("soak")).await);
    fleet.all_up().await;
    let truth = Arc::new(Truth::default());
    let stats = Arc::new(Stats::default());
    let stop = Arc::new(AtomicBool::new(false));
    let users = users::start(&fleet, &truth, &stats, &stop, per_kind, pace);
    let start = Instant::now();
    truth::since_start();
    let sampler = report::Sampler::start(
        fleet.clone(),
        stats.clone(),
        truth.clone(),
        start,
        sample,
        &out,
    );

    let mut n = 0;
    loop {
        let next = start + period * (n as u32 + 1);
        if next + period / 2 > start + length {
            break;
        }
        tokio::time::sleep_until(next.into()).await;
        let at = start.elapsed().as_secs_f64();
        let what = faults::run(n, &fleet, &truth, &stats, period / 2).await;
        eprintln!("[{at:7.1} s] fault {n}: {what}");
        for i in &fleet.instances {
            eprintln!("           {}: {}", i.name, i.health().await);
        }
        sampler.event(at, &what);
        n += 1;
    }
    tokio::time::sleep_until((start + length).into()).await;
    stop.store(true, Relaxed);
    for u in users {
        let _ = u.await;
    }
    let summary = sampler.finish(n, &stats).await;
    eprintln!("{summary}");
    std::fs::write(out.join("summary.txt"), &summary).unwrap();

    let notes = stats.notes.lock().unwrap().join("\n");
    assert!(
        stats.ok.load(Relaxed) > 50 * length.as_secs(),
        "the load ran: {} answers",
        stats.ok.load(Relaxed)
    );
    for (what, counter) in [
        ("failed requests no fault excuses", &stats.failed),
        ("misroutes", &stats.misroutes),
        ("$WSFO while affinity held", &stats.wsfo_wrong),
        ("sessions lost", &stats.lost),
        ("new sessions on a draining server", &stats.drained_new),
        (
            "faults or hostile-burst checks that failed",
            &stats.fault_failed,
        ),
    ] {
        assert_eq!(counter.load(Relaxed), 0, "{what}:\n{notes}");
    }
}
