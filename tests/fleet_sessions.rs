//! A fleet's live sessions (issue 26): each instance counts what it served; the fleet's
//! count, merged through a real Redis as HyperLogLogs, counts every instance's sessions,
//! a session served by two instances once.

mod common;

use common::fleet::{shared_state, until};
use common::redis::Redis;
use common::{cluster_yaml, scratch_dir, tomcats, Browser, Opts, Tether};
use std::collections::HashMap;
use std::time::Duration;

fn instance(sims: &[tether::sim::TomcatSim], url: &str, name: &str) -> Tether {
    Tether::start_with(Opts {
        cluster: cluster_yaml("", sims),
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
