//! Balancing new sessions: weighted round robin and least in-flight.

use super::*;

#[test]
fn weights_1_2_4_share_new_sessions() {
    let mut cfg = cluster(&["a", "b", "c"]);
    for (s, w) in cfg.servers.iter_mut().zip([1, 2, 4]) {
        s.weight = w;
    }
    let r = ClusterRouter::new(&cfg, None);
    let none = HeaderMap::new();
    let mut counts = [0u32; 3];
    const N: u32 = 100_000;
    for _ in 0..N {
        match r.decide(b"/", &none, &Tried::default(), NOW) {
            Decision::Route {
                server,
                outcome: Outcome::NewSession,
            } => counts[server] += 1,
            other => panic!("{other:?}"),
        }
    }
    for (i, want) in [1.0 / 7.0, 2.0 / 7.0, 4.0 / 7.0].iter().enumerate() {
        let share = counts[i] as f64 / N as f64;
        assert!((share - want).abs() < 0.01, "server {i}: {share} vs {want}");
    }
}

#[test]
fn weights_skip_unavailable_servers_without_starving_the_rest() {
    let mut cfg = cluster(&["a", "b", "c"]);
    for (s, w) in cfg.servers.iter_mut().zip([1, 2, 4]) {
        s.weight = w;
    }
    let r = ClusterRouter::new(&cfg, None);
    r.servers()[2].live.mark_down(NOW - 1);
    let none = HeaderMap::new();
    let mut counts = [0u32; 3];
    for _ in 0..30_000 {
        if let Decision::Route { server, .. } = r.decide(b"/", &none, &Tried::default(), NOW) {
            counts[server] += 1;
        }
    }
    assert_eq!(counts[2], 0);
    assert!(counts[0] > 5_000 && counts[1] > 5_000, "{counts:?}");
}

#[test]
fn least_inflight_prefers_the_least_loaded() {
    let mut cfg = four();
    cfg.balance = Balance::LeastInflight;
    let r = ClusterRouter::new(&cfg, None);
    let load = |n: &str, k: usize| (0..k).for_each(|_| r.servers()[idx(&r, n)].live.start());
    load("n1", 5);
    load("n2", 3);
    load("n3", 1);
    load("n4", 7);
    let none = HeaderMap::new();
    let pick = || r.decide(b"/", &none, &Tried::default(), NOW);
    assert_eq!(pick(), route(idx(&r, "n3"), Outcome::NewSession));
    load("n3", 5); // n3 now has 6: n2 (3) is the least loaded
    assert_eq!(pick(), route(idx(&r, "n2"), Outcome::NewSession));
    set_state(&r, &["n2"], ServerState::Draining);
    assert_eq!(
        pick(),
        route(idx(&r, "n1"), Outcome::NewSession),
        "draining skipped"
    );
}

#[test]
fn least_inflight_weighs_load_and_spreads_ties() {
    let mut cfg = cluster(&["a", "b"]);
    cfg.balance = Balance::LeastInflight;
    cfg.servers[1].weight = 4;
    let r = ClusterRouter::new(&cfg, None);
    let none = HeaderMap::new();
    // a: 2 in flight at weight 1; b: 4 at weight 4 → b is relatively less loaded.
    (0..2).for_each(|_| r.servers()[0].live.start());
    (0..4).for_each(|_| r.servers()[1].live.start());
    assert_eq!(
        r.decide(b"/", &none, &Tried::default(), NOW),
        route(1, Outcome::NewSession)
    );
    // Idle equal servers: ties rotate instead of always picking the first.
    let mut cfg = cluster(&["a", "b", "c"]);
    cfg.balance = Balance::LeastInflight;
    let r = ClusterRouter::new(&cfg, None);
    let picked: std::collections::HashSet<_> = (0..6)
        .map(|_| format!("{:?}", r.decide(b"/", &none, &Tried::default(), NOW)))
        .collect();
    assert_eq!(picked.len(), 3, "{picked:?}");
}
