//! A fleet's live sessions: each instance counts what it served; the fleet's
//! count, merged through a real Redis as HyperLogLogs, counts every instance's sessions,
//! a session served by two instances once; and `drain_rescue` balances a stale cookie of a
//! draining server only when no instance holds its session.

mod common;

use common::fleet::{shared_state, until};
use common::redis::Redis;
use common::{cluster_yaml, scratch_dir, tomcats, Browser, Opts, Tether};
use std::collections::HashMap;
use std::time::Duration;

fn instance(sims: &[tether::cli::sim::TomcatSim], url: &str, name: &str) -> Tether {
    instance_with(sims, url, name, "")
}

fn instance_with(
    sims: &[tether::cli::sim::TomcatSim],
    url: &str,
    name: &str,
    cluster: &str,
) -> Tether {
    Tether::start_with(Opts {
        cluster: cluster_yaml(cluster, sims),
        top: shared_state(url, name, ""),
        admin: true,
        metrics: true,
        ..Opts::default()
    })
}

/// (local live, fleet live) per server, from `t`'s `/status`.
async fn counts(t: &Tether) -> HashMap<String, (u64, Option<u64>)> {
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    json["clusters"][0]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let name = s["name"].as_str().unwrap().to_string();
            let live = s["sessions"]["live"].as_u64().unwrap();
            (name, (live, s["sessions"]["fleet_live"].as_u64()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleets_live_sessions_count_every_instance_once() {
    let dir = scratch_dir("fleet-sessions");
    let redis = Redis::start(&dir.join("redis"));
    let sims = tomcats(2).await;
    let a = instance(&sims, &redis.url(), "a");
    let b = instance(&sims, &redis.url(), "b");
    // Six sessions made through a, four through b.
    let mut homes: HashMap<String, u64> = HashMap::new();
    let mut browsers = Vec::new();
    for (t, n) in [(&a, 6), (&b, 4)] {
        for _ in 0..n {
            let mut br = Browser::new(t);
            let (_, home) = br.get("/").await;
            *homes.entry(home).or_default() += 1;
            browsers.push(br);
        }
    }
    // One of a's sessions also goes through b (as behind an L4 balancer): still one.
    let mut again = Browser::new(&b);
    again.cookie = browsers[0].cookie.clone();
    again.get("/").await;
    let (local_a, local_b) = (counts(&a).await, counts(&b).await);
    let total = |c: &HashMap<String, (u64, Option<u64>)>| c.values().map(|v| v.0).sum::<u64>();
    assert_eq!(total(&local_a), 6, "{local_a:?}");
    assert_eq!(total(&local_b), 5, "b served five: {local_b:?}");
    for t in [&a, &b] {
        let homes = homes.clone();
        let took = until("the fleet's count", Duration::from_secs(10), || {
            let homes = homes.clone();
            async move {
                let c = counts(t).await;
                homes.iter().all(|(s, n)| c[s].1 == Some(*n))
            }
        })
        .await;
        println!("the fleet's counts reached an instance within {took:?}");
    }
    let m = common::scrape(a.metrics.unwrap()).await;
    let fleet_total: f64 = m
        .lines()
        .filter(|l| l.starts_with("tether_server_fleet_live_sessions{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(fleet_total, 10.0, "{m}");
}

/// The server `t` sends a request carrying `cookie` to.
async fn server_for(t: &Tether, cookie: &str) -> String {
    let resp = t.client().get("/", &[("Cookie", cookie)]).await.unwrap();
    resp.header("x-server").unwrap().to_string()
}

/// tc1's `sessions` object in `t`'s `/status`.
async fn tc1_sessions(t: &Tether) -> serde_json::Value {
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    json["clusters"][0]["servers"][0]["sessions"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_rescue_in_a_fleet_keeps_the_sessions_any_instance_holds() {
    let dir = scratch_dir("fleet-rescue");
    let redis = Redis::start(&dir.join("redis"));
    let sims = tomcats(2).await;
    let cluster = "    session_timeout: 2s\n    drain_rescue: true\n";
    let a = instance_with(&sims, &redis.url(), "a", cluster);
    let b = instance_with(&sims, &redis.url(), "b", cluster);
    // A session on tc1 that only a serves, and one that only b serves.
    let mut live = Browser::new(&a);
    while live.get("/").await.1 != "tc1" {
        live = Browser::new(&a);
    }
    let mut live_b = Browser::new(&b);
    while live_b.get("/").await.1 != "tc1" {
        live_b = Browser::new(&b);
    }
    let (status, _) = a
        .admin("POST", "/clusters/shop/servers/tc1/drain", None, b"")
        .await;
    assert_eq!(status, 200);
    until("b sees tc1 draining", Duration::from_secs(5), || async {
        let (_, json) = b.admin("GET", "/status", None, b"").await;
        json["clusters"][0]["servers"][0]["state"] == "draining"
    })
    .await;
    // The fleet has not shown b every session yet: a cookie b never saw goes to tc1.
    assert_eq!(tc1_sessions(&b).await["rescue_ready"], false);
    assert_eq!(server_for(&b, "JSESSIONID=EARLY.tc1").await, "tc1");
    // Keep each session alive through its own instance only, until both instances know
    // the fleet's sessions of tc1.
    let mut waited = Duration::ZERO;
    loop {
        let ready = [&a, &b];
        let mut all = true;
        for t in ready {
            all &= tc1_sessions(t).await["rescue_ready"] == true;
        }
        if all {
            break;
        }
        assert!(
            waited < Duration::from_secs(30),
            "{} {}",
            tc1_sessions(&a).await,
            tc1_sessions(&b).await
        );
        assert_eq!(live.get("/").await.1, "tc1");
        assert_eq!(live_b.get("/").await.1, "tc1");
        tokio::time::sleep(Duration::from_millis(300)).await;
        waited += Duration::from_millis(300);
    }
    println!("drain rescue ready on both after {waited:?} more");
    // Each instance has never seen the other's session, yet keeps it on its draining
    // server (the other's filter).
    let cookie = format!("JSESSIONID={}", live.cookie.clone().expect("a session"));
    assert_eq!(server_for(&b, &cookie).await, "tc1", "a's live session");
    let cookie_b = format!("JSESSIONID={}", live_b.cookie.clone().expect("a session"));
    assert_eq!(server_for(&a, &cookie_b).await, "tc1", "b's live session");
    // A cookie no instance holds is balanced as a new session, and counted.
    assert_eq!(server_for(&b, "JSESSIONID=STALE.tc1").await, "tc2");
    assert_eq!(tc1_sessions(&b).await["rescued"], 1);
    // Redis gone: b no longer knows what a holds, and rescues nothing.
    drop(redis);
    until(
        "b notices Redis is gone",
        Duration::from_secs(10),
        || async { tc1_sessions(&b).await["rescue_ready"] == false },
    )
    .await;
    assert_eq!(server_for(&b, "JSESSIONID=LATE.tc1").await, "tc1");
}
