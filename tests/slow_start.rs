//! Slow start: a server that comes back gets a share of new sessions
//! that ramps from 10 % of its weight to all of it; its sessions are not affected.

mod common;

use common::{cluster_yaml, new_sessions, tomcats, Browser, Opts, Tether};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_comes_back_ramps_up_its_share_of_new_sessions() {
    let sims = tomcats(2).await;
    let t = Tether::start_with(Opts {
        cluster: cluster_yaml("    slow_start: 4s\n", &sims),
        admin: true,
        ..Opts::default()
    });
    // At start nothing ramps: an even split.
    let even = new_sessions(&t, 200).await;
    assert_eq!(even.get("tc2"), Some(&100), "{even:?}");
    // A session of tc2 made before, to show its sessions are not held back.
    let mut b = Browser::new(&t);
    while b.get("/").await.1 != "tc2" {
        b = Browser::new(&t);
    }
    let (status, _) = t
        .admin("POST", "/clusters/shop/servers/tc2/stop", None, b"")
        .await;
    assert_eq!(status, 200);
    let (status, _) = t
        .admin("POST", "/clusters/shop/servers/tc2/activate", None, b"")
        .await;
    assert_eq!(status, 200);
    let back = Instant::now();
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    let effective = json["clusters"][0]["servers"][1]["effective_weight"]
        .as_f64()
        .unwrap();
    assert!((0.1..0.3).contains(&effective), "{json}");
    // Its first second: about 10-30 % of its weight, so well under half of new sessions.
    let early = new_sessions(&t, 200).await;
    assert!(
        back.elapsed() < Duration::from_millis(1500),
        "the sample took too long to mean anything"
    );
    let share = *early.get("tc2").unwrap_or(&0);
    assert!(
        (5..60).contains(&share),
        "tc2 got {share} of 200 right after coming back: {early:?}"
    );
    assert_eq!(b.get("/").await.1, "tc2", "its own sessions still reach it");
    // After the ramp: its full share again.
    tokio::time::sleep(Duration::from_secs(4).saturating_sub(back.elapsed())).await;
    let after = new_sessions(&t, 200).await;
    assert_eq!(after.get("tc2"), Some(&100), "{after:?}");
    let (_, json) = t.admin("GET", "/status", None, b"").await;
    assert_eq!(json["clusters"][0]["servers"][1]["effective_weight"], 1.0);
}
