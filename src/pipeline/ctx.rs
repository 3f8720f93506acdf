//! Per-request state kept across Pingora's phases and retries.

use crate::metrics::ClusterMetrics;
use crate::routing::{ClusterRouter, Decision, Outcome, Reject, Tried};
use crate::state::snapshot::Snapshot;
use std::sync::Arc;
use std::time::Instant;

pub struct RequestCtx {
    /// When the request arrived.
    pub start: Instant,
    /// When the current attempt asked for a connection.
    pub connect_start: Option<Instant>,
    /// The cluster router from the snapshot current when the request arrived.
    pub router: Option<Arc<ClusterRouter>>,
    /// The cluster's metric handles, from the same snapshot.
    pub metrics: Option<Arc<ClusterMetrics>>,
    /// The decision made in `request_filter`, used by the first `upstream_peer` call.
    pub first: Option<Decision>,
    /// Servers already tried, in order.
    pub tried: Tried,
    /// A server a routing plugin chose (for a request without a session of the cluster).
    pub preferred: Option<usize>,
    /// The snapshot whose plugin chains this request ran, when any plugin is configured,
    /// with the listener and the cluster the request went to.
    pub plugins: Option<(Arc<Snapshot>, usize, usize)>,
    /// What the plugins keep for this request from phase to phase (a script's `ctx`) and
    /// the fields they add to its access-log line.
    pub plugin_state: tether_plugins::RequestState,
    /// The server of the current attempt (counted in its in-flight gauge).
    pub server: Option<usize>,
    pub outcome: Option<Outcome>,
    /// Why the request was refused, when it was.
    pub rejected: Option<Reject>,
    /// A reused upstream connection broke: send the retry to the same server.
    pub retry_same: bool,
    /// The server answered a `fail_on_status` status: the retry goes elsewhere.
    pub status_failure: bool,
    /// Set `X-Forwarded-*` on the upstream request (the listener's `forwarded_headers`).
    pub forwarded: bool,
    /// The listener's limits, read when the request arrived.
    pub limits: crate::config::ListenerLimits,
    /// The request body's bound (`max_request_body`, the route's or the listener's); 0:
    /// none. Set by `admit`.
    pub body_limit: u64,
    /// The route (index in its listener's routes) and cluster of the request, once known:
    /// whose `error_pages` apply.
    pub route_at: Option<usize>,
    pub cluster_at: Option<usize>,
    /// Informational (1xx) responses relayed so far.
    pub informational: u8,
    /// The cluster's TLS to its servers, when it has one.
    pub upstream_tls: Option<Arc<crate::state::tls::UpstreamTls>>,
    /// The cluster's Tomcat `SSLValve` header names, when set.
    pub ssl_headers: Option<Arc<crate::config::SslHeaders>>,
    /// AJP/1.3 to the cluster's servers, when it speaks it.
    pub ajp: Option<Arc<crate::config::Ajp>>,
    /// The host/path route the request matched, by name.
    pub route: Option<Arc<str>>,
    /// The client: the peer, or the address its trusted proxies name (`client.rs`).
    pub client: Option<std::net::IpAddr>,
    /// The key of the session the decision went by, when the cluster counts live sessions.
    pub session_key: Option<u64>,
    /// The answer is tether's own, for a server that failed to answer (`outlier`'s errors).
    pub upstream_failed: bool,
    /// The current try's slot on its server (`max_inflight`), handed back when dropped.
    pub slot: Option<crate::routing::Slot>,
    /// The `compress` settings and the coding the client takes, when compression is on for
    /// the request (set by `admit`).
    pub compress: Option<crate::pipeline::compress::Asked>,
    /// The answer's compressor on Pingora's proxy, which compresses in a body filter (the
    /// other front ends keep theirs in their relay).
    pub squeezing: Option<crate::pipeline::compress::Encoder>,
}

impl Default for RequestCtx {
    fn default() -> Self {
        RequestCtx::new()
    }
}

impl RequestCtx {
    /// Counts a routing decision in the cluster's metrics.
    pub fn count_decision(&self, decision: Decision) {
        if let Some(m) = &self.metrics {
            m.decision(match decision {
                Decision::Route { outcome, .. } => Some(outcome),
                Decision::Reject(_) => None,
            });
        }
    }

    pub fn new() -> Self {
        RequestCtx {
            start: crate::base::poll_time::now(),
            connect_start: None,
            client: None,
            router: None,
            metrics: None,
            first: None,
            tried: Tried::default(),
            server: None,
            preferred: None,
            plugins: None,
            plugin_state: Default::default(),
            outcome: None,
            rejected: None,
            retry_same: false,
            status_failure: false,
            forwarded: true,
            limits: crate::config::ListenerLimits::default(),
            body_limit: 0,
            route_at: None,
            cluster_at: None,
            informational: 0,
            upstream_tls: None,
            ssl_headers: None,
            ajp: None,
            route: None,
            session_key: None,
            upstream_failed: false,
            slot: None,
            compress: None,
            squeezing: None,
        }
    }

    /// Ends the current attempt's in-flight count.
    pub fn release(&mut self) {
        if let (Some(router), Some(i)) = (&self.router, self.server.take()) {
            router.servers()[i].live.done();
        }
    }

    /// A try of the request begins on `server`, chosen for `outcome`: a try after the first
    /// is counted, the previous try's server released, this one's in flight.
    pub fn begin_try(&mut self, server: usize, outcome: Outcome) {
        if !self.tried.is_empty() {
            if let Some(m) = &self.metrics {
                m.retried();
            }
        }
        self.release();
        if let Some(router) = &self.router {
            router.servers()[server].live.start();
        }
        self.tried.push(server);
        self.server = Some(server);
        self.outcome = Some(outcome);
        self.connect_start = Some(crate::base::poll_time::now());
    }

    /// May the request have another try: within the cluster's `max_attempts`, and before
    /// its `retry_timeout` ran out?
    pub fn may_try_again(&self) -> bool {
        let Some(router) = &self.router else {
            return false;
        };
        self.tried.len() < router.max_attempts as usize
            && router
                .retry
                .timeout
                .is_none_or(|t| self.start.elapsed() < t)
    }

    /// May a request of this kind (`idempotent` or not) be sent again, its body whole?
    pub fn resendable(&self, idempotent: bool) -> bool {
        idempotent || self.router.as_ref().is_some_and(|r| r.retry.non_idempotent)
    }

    /// The request ended with `status` (0: none went out): its server released, its
    /// metrics, the server's record of answers (`outlier`), and the plugins' logging
    /// phase. The server it went to last, and how long it took.
    pub fn done(&mut self, status: u16) -> (Option<usize>, std::time::Duration) {
        let server = self.server;
        self.release();
        self.slot = None;
        // One reading of the clock for the request's duration and the server's record.
        let end = crate::base::poll_time::now();
        let duration = end.saturating_duration_since(self.start);
        if let Some(m) = &self.metrics {
            // A refused request went to no server, whatever it tried.
            let server = if self.rejected.is_some() {
                None
            } else {
                server
            };
            m.request_done(server, status, duration.as_secs_f64());
        }
        if let (Some(router), Some(i), None) = (&self.router, server, self.rejected) {
            router.observe(i, status, self.upstream_failed, crate::routing::ms_at(end));
            if self.upstream_failed {
                let timeout = status == 504;
                router.servers()[i].live.failed_request(timeout);
                if let Some(m) = &self.metrics {
                    m.server_failed(i, timeout);
                }
            }
        }
        super::plugins::log(self, status, server);
        (server, duration)
    }
}
