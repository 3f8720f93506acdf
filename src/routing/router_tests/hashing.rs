//! Consistent hashing of orphaned sessions: stable, spread, and minimal movement.

use super::*;

/// A deterministic stream of Tomcat-looking session ids with an unknown route.
fn orphan_ids(count: usize) -> Vec<String> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..count)
        .map(|_| {
            // xorshift64*: enough spread, no dependency.
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let a = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let b = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
            format!("{a:016X}{b:016X}.retired")
        })
        .collect()
}

/// The server name each orphaned session is hashed to.
fn hash_names(r: &ClusterRouter, ids: &[String]) -> Vec<String> {
    ids.iter()
        .map(|id| {
            match r.decide(
                b"/",
                &cookie(&format!("JSESSIONID={id}")),
                &Tried::default(),
                NOW,
            ) {
                Decision::Route {
                    server,
                    outcome: Outcome::HashFallback,
                } => name(r, server).to_string(),
                other => panic!("{id}: {other:?}"),
            }
        })
        .collect()
}

#[test]
fn orphans_hash_the_same_across_calls_and_routers() {
    let a = ClusterRouter::new(&numbered(10), None);
    let b = ClusterRouter::new(&numbered(10), None);
    let ids = orphan_ids(50);
    let first = hash_names(&a, &ids);
    assert_eq!(
        first,
        hash_names(&b, &ids),
        "independently built routers agree"
    );
    let h = cookie(&format!("JSESSIONID={}", ids[0]));
    let want = a.decide(b"/", &h, &Tried::default(), NOW);
    for _ in 0..1000 {
        assert_eq!(a.decide(b"/", &h, &Tried::default(), NOW), want);
        assert_eq!(b.decide(b"/", &h, &Tried::default(), NOW), want);
    }
    // The whole cluster is used, not one or two servers.
    let spread: std::collections::HashSet<_> =
        hash_names(&a, &orphan_ids(2000)).into_iter().collect();
    assert_eq!(spread.len(), 10);
}

#[test]
fn removing_a_server_moves_only_its_sessions() {
    let ids = orphan_ids(10_000);
    let full = hash_names(&ClusterRouter::new(&numbered(10), None), &ids);
    let mut smaller = numbered(10);
    smaller.servers.remove(4);
    let without = hash_names(&ClusterRouter::new(&smaller, None), &ids);
    let mut moved = 0;
    for (before, after) in full.iter().zip(&without) {
        if before == "s4" {
            moved += 1;
        } else {
            assert_eq!(before, after, "a session not on s4 moved");
        }
    }
    // About a tenth of the sessions were on s4; a bad hash would show here.
    assert!((600..1400).contains(&moved), "{moved} sessions were on s4");
}

#[test]
fn marking_a_server_down_moves_only_its_sessions_to_where_removal_would() {
    let ids = orphan_ids(10_000);
    let r = ClusterRouter::new(&numbered(10), None);
    let before = hash_names(&r, &ids);
    r.servers()[4].live.mark_down(NOW - 1);
    let down = hash_names(&r, &ids);
    let mut smaller = numbered(10);
    smaller.servers.remove(4);
    let removed = hash_names(&ClusterRouter::new(&smaller, None), &ids);
    for i in 0..ids.len() {
        if before[i] != "s4" {
            assert_eq!(before[i], down[i], "a session not on s4 moved");
        }
        assert_eq!(
            down[i], removed[i],
            "down and removed agree, so instances agree"
        );
    }
    // Draining and stopped servers are left out the same way.
    r.servers()[4].live.mark_up();
    r.servers()[4].live.set_state(ServerState::Draining);
    assert_eq!(hash_names(&r, &ids), removed);
}

#[test]
fn hash_fallback_with_weights_and_a_thousand_servers() {
    // Large weighted ring: every orphan lands on an active server, deterministically.
    let mut cfg = numbered(1000);
    cfg.servers
        .iter_mut()
        .enumerate()
        .for_each(|(i, s)| s.weight = 1 + (i % 5) as u32);
    let r = ClusterRouter::new(&cfg, None);
    for i in (0..1000).step_by(2) {
        r.servers()[i].live.mark_down(NOW - 1);
    }
    for id in orphan_ids(500) {
        let h = cookie(&format!("JSESSIONID={id}"));
        match r.decide(b"/", &h, &Tried::default(), NOW) {
            Decision::Route {
                server,
                outcome: Outcome::HashFallback,
            } => assert_eq!(server % 2, 1),
            other => panic!("{other:?}"),
        }
    }
}
