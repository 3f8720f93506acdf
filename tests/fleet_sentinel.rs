//! A fleet on a Sentinel-managed Redis: the master dies, Sentinel promotes its
//! replica, and the instances follow it without a failed request.

mod common;

use common::fleet::*;
use common::redis::Redis;
use common::scratch_dir;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_follows_a_sentinel_failover() {
    let dir = scratch_dir("fleet-sentinel");
    let mut master = Redis::start(&dir.join("master"));
    let port = master.port().to_string();
    let replica = Redis::start_with(&dir.join("replica"), &["--replicaof", "127.0.0.1", &port]);
    let sentinel = Redis::sentinel(&dir.join("sentinel"), "fleet", &master);
    let (_cluster, sims) = was_cluster().await;
    let start = |name: &str| {
        common::Tether::start_with(common::Opts {
            cluster: cluster_yaml(&sims),
            top: format!(
                "shared_state:\n  sentinel:\n    master: fleet\n    addresses: [\"127.0.0.1:{}\"]\n  instance: {name}\n  key_prefix: test\n",
                sentinel.port()
            ),
            admin: true,
            metrics: true,
            log: Some("info"),
            ..common::Opts::default()
        })
    };
    let (a, b) = (start("a"), start("b"));
    let sessions = sessions(&a, 12).await;
    until("b applies a's table", Duration::from_secs(5), || async {
        table_size(&b).await == 6
    })
    .await;
    until(
        "the replica has the table",
        Duration::from_secs(5),
        || async { replica.cli(&["HLEN", "{test}:partitions:shop"]).trim() == "6" },
    )
    .await;

    master.kill();
    until(
        "Sentinel promotes the replica",
        Duration::from_secs(20),
        || async { replica.cli(&["ROLE"]).starts_with("master") },
    )
    .await;
    for (cookie, home) in &sessions {
        assert_eq!(
            &visit(&b, cookie).await.0,
            home,
            "no failed request meanwhile"
        );
    }
    let (status, _) = a
        .admin("POST", "/clusters/shop/servers/was2/drain", None, b"")
        .await;
    assert_eq!(status, 200);
    let took = until(
        "the drain reaches b through the new master",
        Duration::from_secs(10),
        || async { b.server_status(None, "was2").await.0 == "draining" },
    )
    .await;
    println!("drain applied through the promoted master within {took:?}");
    assert_eq!(
        replica
            .cli(&["HGET", "{test}:servers", "shop/was2"])
            .split('|')
            .nth(1),
        Some("draining")
    );
    // The drain can reach Redis from the first steps of a's new session (its flush of what
    // was held back), a moment before a counts itself in sync: wait for that, on both.
    for (name, t) in [("a", &a), ("b", &b)] {
        until(
            &format!("{name} is in sync with the promoted master"),
            Duration::from_secs(10),
            || async { metric(t, "tether_shared_state_up").await == 1.0 },
        )
        .await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}
