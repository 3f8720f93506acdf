//! tether's own view of a request's session, for plugins that ask (a script's
//! `r:session()`): tether implements [`SessionLens`] over its routers, and a plugin reads
//! it on demand, so requests whose plugins never ask pay nothing.

use pingora_http::RequestHeader;

/// Where a request's session would go in one cluster, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub cluster: String,
    /// The session id routing went by (the one that decided, else the first one seen).
    pub id: Option<String>,
    /// Its affinity token: the route after the first `.`, or WebSphere's clone and
    /// partition list.
    pub token: Option<String>,
    /// The server routing would choose now (`None` when it would answer 503).
    pub server: Option<String>,
    /// Why: `route_hit`, `domain_hit`, `partition_hit`, `hash_fallback`, `new_session`,
    /// `failover`, or for a 503 `sticky_force` or `no_server`.
    pub why: &'static str,
}

/// tether's routing, asked without claiming anything (no recovery probe, no turn of the
/// round robin).
pub trait SessionLens: Send + Sync {
    /// The index of the cluster called `name`.
    fn cluster(&self, name: &str) -> Option<usize>;
    /// The session of `req` in cluster `cluster` (an index), `None` for no such cluster.
    fn session(&self, req: &RequestHeader, cluster: usize) -> Option<SessionView>;
}
