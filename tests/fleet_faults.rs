//! A fleet's Redis failing in every way an operator meets: down at start, dying
//! under load, restarted empty, stalled, slow, and garbage under tether's keys. In every
//! case no client request fails or waits on Redis, and the fleet converges once it is back.

mod common;

use common::fleet::*;
use common::redis::Redis;
use common::scratch_dir;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const UP: &str = "tether_shared_state_up";

async fn until_up(t: &common::Tether, up: bool) {
    let want = if up { 1.0 } else { 0.0 };
    until(
        "tether_shared_state_up",
        Duration::from_secs(10),
        || async { metric(t, UP).await == want },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_at_start_then_up_the_fleet_converges() {
    let dir = scratch_dir("fleet-late");
    let mut redis = Redis::not_started(&dir.join("redis"));
    let (_cluster, sims) = was_cluster().await;
    let a = instance(&sims, &redis.url(), "a", "");
    let b = instance(&sims, &redis.url(), "b", "");
    assert!(a.log().contains("unreachable at start"), "{}", a.log());
    let sessions = sessions(&a, 12).await;
    assert_eq!(metric(&a, UP).await, 0.0);
    assert_eq!(table_size(&b).await, 0);

    redis.launch();
    until_up(&a, true).await;
    until_up(&b, true).await;
    until(
        "b has what a learned while Redis was down",
        Duration::from_secs(5),
        || async { table_size(&b).await == 6 },
    )
    .await;
    for (cookie, home) in &sessions {
        assert_eq!(&visit(&b, cookie).await.0, home);
    }
    assert_eq!(wsfo_total(&sims), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_dying_under_load_fails_no_request_and_an_empty_restart_is_refilled() {
    let dir = scratch_dir("fleet-die");
    let mut redis = Redis::start(&dir.join("redis"));
    let (_cluster, sims) = was_cluster().await;
    let fleet = Arc::new(vec![
        instance(&sims, &redis.url(), "a", ""),
        instance(&sims, &redis.url(), "b", ""),
    ]);
    let sessions = Arc::new(sessions(&fleet[0], 12).await);
    until("b applies a's table", Duration::from_secs(5), || async {
        table_size(&fleet[1]).await == 6
    })
    .await;

    // Load: every session, through both instances in turn, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let load = {
        let (fleet, sessions) = (fleet.clone(), sessions.clone());
        let (stop, done, failed) = (stop.clone(), done.clone(), failed.clone());
        tokio::spawn(async move {
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let (cookie, home) = &sessions[i % sessions.len()];
                let header = format!("JSESSIONID={cookie}");
                let t = &fleet[i % 2];
                let resp = t.client().get("/app", &[("Cookie", &header)]).await;
                let ok = resp.is_ok_and(|r| r.status == 200 && r.header("x-server") == Some(home));
                failed.fetch_add(!ok as u64, Ordering::Relaxed);
                done.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    redis.kill();
    until_up(&fleet[0], false).await;
    until_up(&fleet[1], false).await;
    // Requests keep flowing while Redis is away (a count, not a rate: CI machines are slow).
    let at_outage = done.load(Ordering::Relaxed);
    until(
        "40 requests served while Redis is down",
        Duration::from_secs(20),
        || async { done.load(Ordering::Relaxed) >= at_outage + 40 },
    )
    .await;
    // A drain while Redis is away applies here at once and reaches the fleet later.
    let (status, _) = fleet[0]
        .admin("POST", "/clusters/shop/servers/was3/drain", None, b"")
        .await;
    assert_eq!(status, 200);

    redis.launch(); // empty
    until_up(&fleet[0], true).await;
    until_up(&fleet[1], true).await;
    until(
        "the instances republish their tables",
        Duration::from_secs(5),
        || async { redis.cli(&["HLEN", "{test}:partitions:shop"]).trim() == "6" },
    )
    .await;
    until(
        "b gets the drain made during the outage",
        Duration::from_secs(5),
        || async { fleet[1].server_status(None, "was3").await.0 == "draining" },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    let (done, failed) = (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    println!("{done} requests through the outage, {failed} failed or misrouted");
    assert_eq!(failed, 0);

    // A new instance, started after the empty restart, gets everything from Redis.
    let c = instance(&sims, &redis.url(), "c", "");
    assert_eq!(table_size(&c).await, 6);
    assert_eq!(c.server_status(None, "was3").await.0, "draining");
    assert!(metric(&fleet[0], "tether_shared_state_reconnects_total").await >= 1.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_never_holds_a_request_or_an_admin_call() {
    let dir = scratch_dir("fleet-stall");
    let redis = Redis::start(&dir.join("redis"));
    let (_cluster, sims) = was_cluster().await;
    // Long timeouts: a request that waited on Redis would wait seconds.
    let slow = "  command_timeout: 3s\n";
    let a = instance(&sims, &redis.url(), "a", slow);
    let b = instance(&sims, &redis.url(), "b", slow);
    let sessions = sessions(&a, 6).await;
    until("b applies a's table", Duration::from_secs(5), || async {
        table_size(&b).await == 6
    })
    .await;

    redis.pause();
    let quick = Duration::from_millis(1000);
    for round in 0..10 {
        for (i, (cookie, home)) in sessions.iter().enumerate() {
            let t = if (round + i) % 2 == 0 { &a } else { &b };
            let (server, _) = tokio::time::timeout(quick, visit(t, cookie))
                .await
                .expect("a request waited on the stalled Redis");
            assert_eq!(&server, home);
        }
    }
    let drain = a.admin("POST", "/clusters/shop/servers/was2/drain", None, b"");
    let (status, _) = tokio::time::timeout(quick, drain)
        .await
        .expect("an admin call waited on the stalled Redis");
    assert_eq!(status, 200);
    until_up(&a, false).await;

    redis.resume();
    until_up(&a, true).await;
    until(
        "b gets the drain made during the stall",
        Duration::from_secs(10),
        || async { b.server_status(None, "was2").await.0 == "draining" },
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_redis_slows_the_sync_not_the_requests() {
    let dir = scratch_dir("fleet-slow");
    let redis = Redis::start(&dir.join("redis"));
    let relay = slow_relay(redis.addr(), Duration::from_millis(100)).await;
    let url = format!("redis://{relay}/0");
    let (_cluster, sims) = was_cluster().await;
    let a = instance(&sims, &url, "a", "");
    let b = instance(&sims, &url, "b", "");
    until_up(&a, true).await;
    until_up(&b, true).await;
    let sessions = sessions(&a, 12).await;
    let took = until(
        "b applies a's table through the slow link",
        Duration::from_secs(10),
        || async { table_size(&b).await == 6 },
    )
    .await;
    println!("applied through a Redis 200 ms away (round trip) within {took:?}");
    for (cookie, home) in &sessions {
        let (server, _) = tokio::time::timeout(Duration::from_millis(1000), visit(&b, cookie))
            .await
            .expect("a request waited on the slow Redis");
        assert_eq!(&server, home);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_under_the_fleets_keys_is_counted_and_ignored() {
    let dir = scratch_dir("fleet-garbage");
    let redis = Redis::start(&dir.join("redis"));
    let (_cluster, sims) = was_cluster().await;
    for args in [
        &["HSET", "{test}:partitions:shop", "zz", "junk"][..],
        &[
            "HSET",
            "{test}:partitions:shop",
            "00000000000000aa",
            "1|nosuchclone|x",
        ],
        &["HSET", "{test}:servers", "shop/was1", "garbage"],
        &["HSET", "{test}:servers", "shop/nosuch", "1|draining|1|x"],
        &["HSET", "{test}:instances", "x", "\u{1}\u{2}"],
    ] {
        redis.cli(args);
    }
    let mut a = instance(&sims, &redis.url(), "a", "");
    let mut b = instance(&sims, &redis.url(), "b", "");
    until_up(&a, true).await;
    until_up(&b, true).await;
    for args in [
        &[
            "XADD",
            "{test}:events",
            "*",
            "k",
            "p",
            "c",
            "shop",
            "f",
            "zz",
            "v",
            "junk",
        ][..],
        &["XADD", "{test}:events", "*", "k", "nonsense"],
        &[
            "XADD",
            "{test}:events",
            "*",
            "k",
            "s",
            "f",
            "shop/was2",
            "v",
            "5|sideways|1|x",
        ],
        &[
            "XADD",
            "{test}:events",
            "*",
            "k",
            "p",
            "c",
            "nosuch",
            "f",
            "00000000000000aa",
            "v",
            "1|c1|x",
        ],
    ] {
        redis.cli(args);
    }
    until("a counts the garbage", Duration::from_secs(5), || async {
        metric(&a, "tether_shared_state_rejected_total{reason=\"garbage\"}").await >= 5.0
            && metric(&a, "tether_shared_state_rejected_total{reason=\"unknown\"}").await >= 3.0
    })
    .await;
    assert_eq!(a.server_status(None, "was1").await.0, "active");
    assert_eq!(a.server_status(None, "was2").await.0, "active");

    // The sync still works, and a key of the wrong type is logged, not fatal.
    redis.cli(&["DEL", "{test}:partitions:shop"]);
    redis.cli(&["SET", "{test}:partitions:shop", "not a hash"]);
    let sessions = sessions(&a, 6).await;
    let (status, _) = a
        .admin("POST", "/clusters/shop/servers/was3/drain", None, b"")
        .await;
    assert_eq!(status, 200);
    until("b gets the drain", Duration::from_secs(2), || async {
        b.server_status(None, "was3").await.0 == "draining"
    })
    .await;
    until(
        "a logs the refused update",
        Duration::from_secs(5),
        || async { a.log().contains("Redis refused") },
    )
    .await;
    for (cookie, home) in &sessions {
        assert_eq!(&visit(&a, cookie).await.0, home);
    }
    assert!(a.alive() && b.alive());
    assert_eq!(metric(&a, UP).await, 1.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_a_restart_falls_back_to_its_state_dir() {
    let dir = scratch_dir("fleet-fallback");
    let mut redis = Redis::start(&dir.join("redis"));
    let (_cluster, sims) = was_cluster().await;
    let url = redis.url();
    let opts = || common::Opts {
        cluster: cluster_yaml(&sims),
        top: format!(
            "state_dir: {}/state\n{}",
            dir.display(),
            shared_state(&url, "a", "")
        ),
        admin: true,
        metrics: true,
        log: Some("info"),
        dir: Some(dir.join("a")),
        ..common::Opts::default()
    };
    let a = common::Tether::start_with(opts());
    let sessions = sessions(&a, 12).await;
    let (status, _) = a
        .admin("POST", "/clusters/shop/servers/was2/drain", None, b"")
        .await;
    assert_eq!(status, 200);
    a.terminate(); // saves its table and changes under state_dir
    redis.kill();

    let a = common::Tether::start_with(opts());
    assert!(a.log().contains("unreachable at start"), "{}", a.log());
    assert_eq!(table_size(&a).await, 6, "the table from state_dir");
    assert_eq!(a.server_status(None, "was2").await.0, "draining");
    for (cookie, home) in &sessions {
        assert_eq!(&visit(&a, cookie).await.0, home);
    }
    assert_eq!(wsfo_total(&sims), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
