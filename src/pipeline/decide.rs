//! The routing decision of a request, for every front end: its cluster bound from the
//! snapshot, the router asked over the front end's view (the servers already tried left
//! out), and, for a WebSphere session about to fail over while a fleet feeds the partition
//! table, the fleet's word awaited first (`fleet_wait.rs`).

use super::{fleet_wait, Front, RequestCtx};
use crate::routing::{now_ms, ClusterRouter, Decision, Reject};
use crate::state::snapshot::Snapshot;
use log::warn;

impl RequestCtx {
    /// The request goes to cluster `cluster` of `snapshot`: its router, metrics, TLS to
    /// its servers, `SSLValve` fields and AJP.
    pub fn bind(&mut self, snapshot: &Snapshot, cluster: usize) {
        self.router = Some(snapshot.clusters[cluster].clone());
        self.metrics = Some(snapshot.metrics[cluster].clone());
        self.upstream_tls = snapshot.upstream_tls[cluster].clone();
        self.ssl_headers = snapshot.ssl_headers[cluster].clone();
        self.ajp = snapshot.ajp[cluster].clone();
        self.cluster_at = Some(cluster);
    }
}

/// The decision at `now` (ms), not counted yet.
pub fn decide(ctx: &mut RequestCtx, front: &impl Front, now: u64) -> Decision {
    let Some(router) = &ctx.router else {
        return Decision::Reject(Reject::NoServer);
    };
    let (d, key) = router.decide_keyed(front.target(), front, &ctx.tried, now, ctx.preferred);
    ctx.session_key = key;
    d
}

/// `d`, or, when it would fail a WebSphere session over while a fleet feeds the
/// partition table, what is decided once the fleet has had its word. Boxed only when it
/// waits.
pub async fn settled(ctx: &mut RequestCtx, front: &impl Front, d: Decision) -> Decision {
    if !fleet_wait::waits(ctx.router.as_deref(), d, ctx.session_key) {
        return d;
    }
    let router = ctx.router.clone().expect("waits() saw it");
    let key = ctx.session_key;
    let wait = fleet_wait::settle(&router, d, key, || decide(ctx, front, now_ms()));
    Box::pin(wait).await
}

/// A refusal tether decides (no server left, `sticky_force`) is an expected outcome:
/// counted (`tether_routing_decisions_total{outcome="rejected"}`) and logged at warning
/// level, at most once a second with the count.
pub fn log_refusal(router: &ClusterRouter, reason: Reject) {
    static EVERY: crate::base::every::Every = crate::base::every::Every::new(1000);
    if let Some(n) = EVERY.due(now_ms()) {
        let why = match reason {
            Reject::StickyForce => {
                "the session's server cannot take it and sticky_force forbids failover"
            }
            Reject::NoServer => "no server can take it",
            Reject::Busy => "its server is at max_inflight and its queue was full or timed out",
        };
        warn!(
            "cluster {}: request refused with 503: {why} ({n} refused since the last such line)",
            router.name
        );
    }
}
