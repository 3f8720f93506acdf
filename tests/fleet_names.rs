//! Fleet instances' names: instances left with the default name on one
//! host are distinct members that apply each other's changes, and two processes that do
//! share a name say so, and still apply each other's changes.

mod common;

use common::fleet::*;
use common::redis::Redis;
use common::{scratch_dir, Opts, Tether};
use std::time::Duration;

/// An instance with `shared_state` left at its defaults but for the Redis URL and prefix
/// (no `instance:`), optionally with its own `state_dir`.
fn unnamed(sims: &[tether::cli::sim::WebSphereSim], url: &str, state_dir: Option<&str>) -> Tether {
    let dir = state_dir.map_or(String::new(), |d| format!("state_dir: {d}\n"));
    Tether::start_with(Opts {
        cluster: cluster_yaml(sims),
        top: format!("{dir}shared_state:\n  url: \"{url}\"\n  key_prefix: test\n"),
        admin: true,
        metrics: true,
        log: Some("info"),
        ..Opts::default()
    })
}

async fn name_of(t: &Tether) -> String {
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    json["fleet"]["instance"].as_str().unwrap().to_string()
}

/// The scenario of the issue: 50 sessions made through the first instance, then, 2 s later,
/// each session's next five requests through instances 2, 3, 1, 2, 3.
async fn sessions_continue_through_the_others(
    fleet: &[Tether],
    sims: &[tether::cli::sim::WebSphereSim],
) {
    let made = sessions(&fleet[0], 50).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut moved = 0;
    let mut lost = 0;
    for (cookie, home) in &made {
        for (step, &i) in [1usize, 2, 0, 1, 2].iter().enumerate() {
            let (server, count) = visit(&fleet[i], cookie).await;
            moved += usize::from(&server != home);
            lost += usize::from(count != step as u64 + 2);
        }
    }
    let wsfo = wsfo_total(sims);
    println!(
        "250 requests through three instances: {moved} moved, {lost} with lost data, {wsfo} $WSFO"
    );
    assert_eq!(
        (moved, lost, wsfo),
        (0, 0, 0),
        "every request stays home, with its data, and none is tagged $WSFO"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_with_default_names_on_one_host_are_a_fleet() {
    let dir = scratch_dir("fleet-default-names");
    let redis = Redis::start(&dir.join("redis"));
    let (_cluster, sims) = was_cluster().await;
    // One without a state_dir (a name for this run), two with their own (a kept name).
    let kept: Vec<String> = (1..=2)
        .map(|i| dir.join(format!("state{i}")).display().to_string())
        .collect();
    let mut fleet = vec![
        unnamed(&sims, &redis.url(), None),
        unnamed(&sims, &redis.url(), Some(&kept[0])),
        unnamed(&sims, &redis.url(), Some(&kept[1])),
    ];
    let mut names = Vec::new();
    for t in &fleet {
        names.push(name_of(t).await);
    }
    println!("default names: {names:?}");
    assert!(
        names[0] != names[1] && names[1] != names[2] && names[0] != names[2],
        "each instance has a name of its own: {names:?}"
    );
    until(
        "all three see each other",
        Duration::from_secs(5),
        || async {
            let (_, json) = fleet[0].admin("GET", "/status", None, b"").await;
            json["fleet"]["instances"].as_array().map_or(0, Vec::len) == 3
        },
    )
    .await;

    sessions_continue_through_the_others(&fleet, &sims).await;

    // An operator's drain through the second instance reaches the others.
    let (status, _) = fleet[1]
        .admin("POST", "/clusters/shop/servers/was1/drain", None, b"")
        .await;
    assert_eq!(status, 200);
    for t in [&fleet[0], &fleet[2]] {
        until(
            "the drain reaches the others",
            Duration::from_secs(2),
            || async { t.server_status(None, "was1").await.0 == "draining" },
        )
        .await;
        let (_, json) = t.admin("GET", "/status", None, b"").await;
        let change = &json["clusters"][0]["servers"][0]["fleet_change"];
        assert_eq!(
            change["by"],
            names[1].as_str(),
            "status names who drained it"
        );
    }
    for t in &fleet {
        assert_eq!(metric(t, "tether_shared_state_name_conflict").await, 0.0);
        assert!(!t.log().contains("runs with this instance's name"));
    }

    // A restart keeps the name that state_dir holds.
    drop(fleet.pop());
    let again = unnamed(&sims, &redis.url(), Some(&kept[1]));
    assert_eq!(
        name_of(&again).await,
        names[2],
        "the name survives a restart"
    );
    assert_eq!(
        again.server_status(None, "was1").await.0,
        "draining",
        "and the restarted instance starts with the fleet's changes"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_with_one_name_say_so_and_still_share_their_changes() {
    let dir = scratch_dir("fleet-same-name");
    let redis = Redis::start(&dir.join("redis"));
    let (_cluster, sims) = was_cluster().await;
    // Two processes on one state_dir: they read the same kept name. The third is named.
    let shared = dir.join("state").display().to_string();
    let first = unnamed(&sims, &redis.url(), Some(&shared));
    let fleet = vec![
        first,
        unnamed(&sims, &redis.url(), Some(&shared)),
        instance(&sims, &redis.url(), "c", ""),
    ];
    let name = name_of(&fleet[0]).await;
    assert_eq!(name_of(&fleet[1]).await, name);

    sessions_continue_through_the_others(&fleet, &sims).await;

    for t in &fleet[..2] {
        until(
            "each of the two reports the other",
            Duration::from_secs(15),
            || async { metric(t, "tether_shared_state_name_conflict").await == 1.0 },
        )
        .await;
        assert!(
            t.log()
                .contains(&format!("runs with this instance's name {name}")),
            "{}",
            t.log()
        );
        let (_, json) = t.admin("GET", "/status", None, b"").await;
        assert!(
            json["fleet"]["name_conflict"]["pid"].as_u64().is_some(),
            "{json}"
        );
    }
    assert_eq!(
        metric(&fleet[2], "tether_shared_state_name_conflict").await,
        0.0
    );

    // One of the two stops: the other says the conflict is over.
    let mut fleet = fleet;
    let second = fleet.remove(1);
    drop(second);
    until("the conflict ends", Duration::from_secs(10), || async {
        metric(&fleet[0], "tether_shared_state_name_conflict").await == 0.0
    })
    .await;
    assert!(fleet[0].log().contains("has stopped writing its heartbeat"));
    let _ = std::fs::remove_dir_all(&dir);
}
