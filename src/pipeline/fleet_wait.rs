//! A WebSphere request about to fail over, while a fleet feeds the partition table, waits
//! for the fleet first: another instance may have learned the session's partition a
//! moment ago, or already failed it over to a new owner (`routing/partitions/feed.rs`
//! says why). The pipeline's decision (`decide.rs`) calls it for a request's first
//! decision and for the decision after a server could not be reached.

use crate::routing::{now_ms, ClusterRouter, Decision};
use std::time::Duration;

/// Longest wait: another instance's publishing period (100 ms) and Redis's delivery, with
/// room to spare.
pub const WAIT: Duration = Duration::from_millis(300);

/// Would `d` carry `$WSFO` (the session goes away from its partition's owner)?
fn away(d: Decision) -> bool {
    match d {
        Decision::Route { outcome, .. } => outcome.away(),
        Decision::Reject(_) => false,
    }
}

/// Does the request whose decision is `first` wait for the fleet? (No allocation, no
/// lock: a check of the decision, the cluster's style and the table's feed.)
pub fn waits(router: Option<&ClusterRouter>, first: Decision, key: Option<u64>) -> bool {
    away(first) && router.is_some_and(|r| r.fleet_feed(first, key, now_ms()).is_some())
}

/// `first`, or, when the fleet may know better where the session's partition is, the
/// decision made again at each change of the table until it no longer goes away from the
/// owner or [`WAIT`] has passed.
pub async fn settle(
    router: &ClusterRouter,
    first: Decision,
    key: Option<u64>,
    mut decide: impl FnMut() -> Decision,
) -> Decision {
    let Some(feed) = router.fleet_feed(first, key, now_ms()) else {
        return first;
    };
    let until = tokio::time::Instant::now() + WAIT;
    loop {
        let next = feed.next_change();
        tokio::pin!(next);
        // Registered before looking again, so a change in between is not missed.
        next.as_mut().enable();
        let d = decide();
        if !away(d) {
            return d;
        }
        if tokio::time::timeout_at(until, next).await.is_err() {
            feed.waited_in_vain(key, now_ms());
            return d;
        }
    }
}
