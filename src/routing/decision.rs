//! What the routing decision returns: a server and the reason, or a refusal.

/// Why a server was chosen; the label is what metrics and the access log show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The session's route (jvmRoute) or clone id named a usable server.
    RouteHit,
    /// The session's route named a mod_jk domain; a server of that domain took it.
    DomainHit,
    /// The session's WebSphere partition mapped to a usable server.
    PartitionHit,
    /// The session named no known server; the consistent hash of its id chose one.
    HashFallback,
    /// No session: balanced by weight.
    NewSession,
    /// The session's server could not take it; another server did.
    Failover,
}

impl Outcome {
    /// Does the request go to a server other than its session's (WebSphere's `$WSFO`)?
    pub fn away(self) -> bool {
        matches!(self, Outcome::Failover | Outcome::HashFallback)
    }

    /// Every outcome, in [`Outcome::index`] order.
    pub const ALL: [Outcome; 6] = [
        Outcome::RouteHit,
        Outcome::DomainHit,
        Outcome::PartitionHit,
        Outcome::HashFallback,
        Outcome::NewSession,
        Outcome::Failover,
    ];

    /// Position in [`Outcome::ALL`] (for arrays of per-outcome handles).
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::RouteHit => "route_hit",
            Outcome::DomainHit => "domain_hit",
            Outcome::PartitionHit => "partition_hit",
            Outcome::HashFallback => "hash_fallback",
            Outcome::NewSession => "new_session",
            Outcome::Failover => "failover",
        }
    }
}

/// Why no server was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// `sticky_force`: the session's server (or every active server of its domain) cannot
    /// take it, or, in a Tomcat-style cluster, the session names no server or domain at
    /// all; failover and the hash fallback are forbidden.
    StickyForce,
    /// No server that may take this request is left.
    NoServer,
    /// Its server is at its `max_inflight`, and its queue was full or no slot came in the
    /// queue's time.
    Busy,
}

impl Reject {
    /// The short plain-text body sent with the 503.
    pub fn body(self) -> &'static str {
        match self {
            Reject::StickyForce => {
                "503 Service Unavailable: the server holding this session is not available\n"
            }
            Reject::NoServer => "503 Service Unavailable: no server is available\n",
            Reject::Busy => "503 Service Unavailable: the server is busy; try again shortly\n",
        }
    }
}

/// The result of [`super::ClusterRouter::decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Send the request to `servers[server]`.
    Route { server: usize, outcome: Outcome },
    /// Answer 503.
    Reject(Reject),
}
