//! Per-request state kept across Pingora's phases and retries.

use crate::routing::{ClusterRouter, Decision, Outcome, Reject, Tried};
use std::sync::Arc;

#[derive(Default)]
pub struct RequestCtx {
    /// The cluster router from the snapshot current when the request arrived.
    pub router: Option<Arc<ClusterRouter>>,
    /// The decision made in `request_filter`, used by the first `upstream_peer` call.
    pub first: Option<Decision>,
    /// Servers already tried, in order.
    pub tried: Tried,
    /// The server of the current attempt (counted in its in-flight gauge).
    pub server: Option<usize>,
    pub outcome: Option<Outcome>,
    /// Why the request was refused, when it was.
    pub rejected: Option<Reject>,
    /// A reused upstream connection broke: send the retry to the same server.
    pub retry_same: bool,
    /// The server answered a `fail_on_status` status: the retry goes elsewhere.
    pub status_failure: bool,
}

impl RequestCtx {
    /// Ends the current attempt's in-flight count.
    pub fn release(&mut self) {
        if let (Some(router), Some(i)) = (&self.router, self.server.take()) {
            router.servers()[i].live.done();
        }
    }
}
