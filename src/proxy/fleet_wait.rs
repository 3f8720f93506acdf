//! A WebSphere session whose partition this instance has not learned, while a fleet feeds
//! its table, waits for the fleet before it fails over: another instance may have learned
//! the partition a moment ago (`routing/partitions/feed.rs` says why). Both engines call
//! it for a request's first decision.

use crate::routing::{now_ms, ClusterRouter, Decision, Outcome};
use std::time::Duration;

/// Longest wait: another instance's publishing period (100 ms) and Redis's delivery, with
/// room to spare.
pub const WAIT: Duration = Duration::from_millis(300);

fn hashed(d: Decision) -> bool {
    matches!(
        d,
        Decision::Route {
            outcome: Outcome::HashFallback,
            ..
        }
    )
}

/// Does the request whose first decision is `first` wait for the fleet? (No allocation,
/// no lock: a check of the decision, the cluster's style and the table's feed.)
pub fn waits(router: Option<&ClusterRouter>, first: Decision, key: Option<u64>) -> bool {
    hashed(first) && router.is_some_and(|r| r.fleet_feed(first, key, now_ms()).is_some())
}

/// `first`, or, when the fleet may know the session's partition, the decision made again
/// at each change of the table until it is known or [`WAIT`] has passed.
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
        if !hashed(d) {
            return d;
        }
        if tokio::time::timeout_at(until, next).await.is_err() {
            feed.waited_in_vain(key, now_ms());
            return d;
        }
    }
}
