//! Reloading the configuration: live state carries over by server name.

use super::*;
use crate::routing::Health;
use std::collections::HashMap as Map;

/// A reload keeps each server's live state by name, so a down server stays down.
#[test]
fn reload_keeps_live_state_by_name() {
    let old = ClusterRouter::new(&four(), None);
    old.servers()[idx(&old, "n2")].live.mark_down(NOW - 1);
    let mut cfg = four();
    cfg.servers.remove(0);
    let new = ClusterRouter::new(&cfg, Some(&old));
    let by_name: Map<&str, bool> = new
        .servers()
        .iter()
        .map(|s| (s.config.name.as_str(), s.live.health() == Health::Up))
        .collect();
    assert!(!by_name["n2"]);
    assert!(by_name["n3"] && by_name["n4"]);
    let h = cookie("JSESSIONID=A.n2");
    assert!(matches!(
        new.decide(b"/", &h, &Tried::default(), NOW),
        Decision::Route {
            outcome: Outcome::Failover,
            ..
        }
    ));
}
