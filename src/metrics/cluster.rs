//! Per-cluster metric handles, resolved when the routing snapshot is built.

use super::{
    CONNECT_DURATION, CONNECT_FAILURES, DECISIONS, REQUESTS, REQUEST_DURATION, RETRIES,
    SERVER_FAILED, WSFO,
};
use crate::routing::{ClusterRouter, Outcome};
use pingora_prometheus::prometheus::{Histogram, IntCounter};

/// Status classes, by `status / 100`; index 0 is a request that got no response.
const CLASSES: [&str; 6] = ["none", "1xx", "2xx", "3xx", "4xx", "5xx"];
/// The `reason` labels of `tether_server_failed_requests_total`.
const FAILED: [&str; 2] = ["error", "timeout"];
/// The `server` label of requests tether answered itself.
const NO_SERVER: &str = "none";

pub struct ClusterMetrics {
    /// `[server][class]`; the last row is for requests no server answered.
    requests: Box<[[IntCounter; 6]]>,
    duration: Histogram,
    connect: Histogram,
    connect_failures: Box<[IntCounter]>,
    /// `[server][error, timeout]`.
    failed: Box<[[IntCounter; 2]]>,
    retries: IntCounter,
    /// Indexed by [`Outcome::index`]; `rejected` last.
    decisions: Box<[IntCounter]>,
    wsfo: IntCounter,
    queue: super::queue::QueueMetrics,
}

impl ClusterMetrics {
    /// Resolves the handles of `router`'s cluster. Series of servers that `previous` had
    /// and `router` has not are removed, so a reload leaves no stale series behind.
    pub fn new(router: &ClusterRouter, previous: Option<&ClusterRouter>) -> ClusterMetrics {
        let c = router.name.as_str();
        if let Some(old) = previous {
            for s in old.servers() {
                let name = s.config.name.as_str();
                if router.servers().iter().all(|n| n.config.name != name) {
                    for class in CLASSES {
                        let _ = REQUESTS.remove_label_values(&[c, name, class]);
                    }
                    let _ = CONNECT_FAILURES.remove_label_values(&[c, name]);
                    for reason in FAILED {
                        let _ = SERVER_FAILED.remove_label_values(&[c, name, reason]);
                    }
                }
            }
        }
        let names = router
            .servers()
            .iter()
            .map(|s| s.config.name.as_str())
            .chain(std::iter::once(NO_SERVER));
        let requests = names
            .map(|server| CLASSES.map(|class| REQUESTS.with_label_values(&[c, server, class])))
            .collect();
        let connect_failures = router
            .servers()
            .iter()
            .map(|s| CONNECT_FAILURES.with_label_values(&[c, &s.config.name]))
            .collect();
        let failed = router
            .servers()
            .iter()
            .map(|s| FAILED.map(|r| SERVER_FAILED.with_label_values(&[c, &s.config.name, r])))
            .collect();
        let decisions = Outcome::ALL
            .iter()
            .map(|o| o.as_str())
            .chain(std::iter::once("rejected"))
            .map(|o| DECISIONS.with_label_values(&[c, o]))
            .collect();
        ClusterMetrics {
            requests,
            duration: REQUEST_DURATION.with_label_values(&[c]),
            connect: CONNECT_DURATION.with_label_values(&[c]),
            connect_failures,
            failed,
            retries: RETRIES.with_label_values(&[c]),
            decisions,
            wsfo: WSFO.with_label_values(&[c]),
            queue: super::queue::QueueMetrics::new(router, previous),
        }
    }

    /// A finished request: its server (if any), status (0: no response) and duration.
    pub fn request_done(&self, server: Option<usize>, status: u16, seconds: f64) {
        let row = server
            .unwrap_or(self.requests.len() - 1)
            .min(self.requests.len() - 1);
        let class = match status {
            100..=599 => (status / 100) as usize,
            _ => 0,
        };
        self.requests[row][class].inc();
        self.duration.observe(seconds);
    }

    pub fn decision(&self, outcome: Option<Outcome>) {
        let i = outcome.map_or(self.decisions.len() - 1, Outcome::index);
        self.decisions[i].inc();
    }

    pub fn connected(&self, seconds: f64) {
        self.connect.observe(seconds);
    }

    pub fn connect_failed(&self, server: usize) {
        if let Some(c) = self.connect_failures.get(server) {
            c.inc();
        }
    }

    /// tether answered a request for `server`, which failed it (`timeout`: a 504).
    pub fn server_failed(&self, server: usize, timeout: bool) {
        if let Some(c) = self.failed.get(server) {
            c[usize::from(timeout)].inc();
        }
    }

    pub fn retried(&self) {
        self.retries.inc();
    }

    pub fn wsfo_tagged(&self) {
        self.wsfo.inc();
    }

    /// A request waited `seconds` in `server`'s queue (the cluster's for `None`), and got
    /// a slot or was `refused`.
    pub fn queued(
        &self,
        server: Option<usize>,
        seconds: f64,
        refused: Option<crate::routing::Full>,
    ) {
        self.queue.waited(server, seconds, refused);
    }
}
