//! `max_inflight_per: fleet` over a real Redis: the fleet shares a server's bound, each
//! instance taking `max_inflight` divided by the instances alive (rounded up), as their
//! heartbeats say; an instance that stops gives its share back to the others.

mod common;

use common::fleet::*;
use common::redis::Redis;
use common::{scratch_dir, Opts, Tether};
use std::time::Duration;

fn instance_bounded(sims: &[tether::cli::sim::WebSphereSim], url: &str, name: &str) -> Tether {
    Tether::start_with(Opts {
        cluster: cluster_yaml_with(sims, "    max_inflight: 5\n    max_inflight_per: fleet\n"),
        top: shared_state(url, name, ""),
        admin: true,
        metrics: true,
        ..Opts::default()
    })
}

/// `max_inflight` of `was1` on `t`'s `/status` (the bound this instance applies).
async fn bound(t: &Tether) -> u64 {
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    json["clusters"][0]["servers"][0]["max_inflight"]
        .as_u64()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_shared_by_the_fleet_is_divided_by_the_instances_alive() {
    let dir = scratch_dir("fleet-bounds");
    let redis = Redis::start(&dir.join("redis"));
    let (_cluster, sims) = was_cluster().await;
    let a = instance_bounded(&sims, &redis.url(), "a");
    until(
        "a alone takes the whole bound",
        Duration::from_secs(5),
        || async { bound(&a).await == 5 },
    )
    .await;
    let b = instance_bounded(&sims, &redis.url(), "b");
    for t in [&a, &b] {
        until(
            "each of two takes 3 (5 / 2, rounded up)",
            Duration::from_secs(5),
            || async { bound(t).await == 3 },
        )
        .await;
    }
    let scrape = common::scrape(a.metrics.unwrap()).await;
    assert!(
        scrape.contains(r#"tether_server_max_inflight{cluster="shop",server="was1"} 3"#),
        "{scrape}"
    );
    drop(b);
    let took = until(
        "b's share comes back to a",
        Duration::from_secs(12),
        || async { bound(&a).await == 5 },
    )
    .await;
    println!("a took the whole bound again {took:?} after b stopped");
}
