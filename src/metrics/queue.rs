//! The queues of servers at their `max_inflight`: how long requests waited for a slot, and
//! those refused (the queue full, or no slot in its time).

use crate::routing::{ClusterRouter, Full};
use once_cell::sync::Lazy;
use pingora_prometheus::prometheus::{
    register_histogram_vec, register_int_counter_vec, Histogram, HistogramVec, IntCounter,
    IntCounterVec,
};

static WAIT: Lazy<HistogramVec> = Lazy::new(|| {
    register_histogram_vec!(
        "tether_queue_wait_seconds",
        "Time a request waited for a slot on a server at its max_inflight (got one or not).",
        &["cluster"],
        super::BUCKETS.to_vec()
    )
    .expect("register tether_queue_wait_seconds")
});

static REFUSED: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_queue_refused_total",
        "Requests refused with 503 for want of a slot on their server (server=\"\": new \
         sessions, waiting in the cluster's queue for any server): `full` (the queue held \
         queue.length requests) or `timeout` (no slot in queue.timeout).",
        &["cluster", "server", "reason"]
    )
    .expect("register tether_queue_refused_total")
});

/// A cluster's handles.
pub struct QueueMetrics {
    wait: Histogram,
    /// `[server][full, timeout]`, then the cluster's queue's.
    refused: Box<[[IntCounter; 2]]>,
}

impl QueueMetrics {
    pub fn new(router: &ClusterRouter, previous: Option<&ClusterRouter>) -> QueueMetrics {
        let c = router.name.as_str();
        for old in previous.iter().flat_map(|p| p.servers()) {
            let name = old.config.name.as_str();
            if router.servers().iter().all(|s| s.config.name != name) {
                for reason in ["full", "timeout"] {
                    let _ = REFUSED.remove_label_values(&[c, name, reason]);
                }
            }
        }
        QueueMetrics {
            wait: WAIT.with_label_values(&[c]),
            refused: router
                .servers()
                .iter()
                .map(|s| s.config.name.as_str())
                .chain([""])
                .map(|name| ["full", "timeout"].map(|r| REFUSED.with_label_values(&[c, name, r])))
                .collect(),
        }
    }

    /// A request waited `seconds` in `server`'s queue (the cluster's for `None`), and got
    /// a slot or `refused`.
    pub fn waited(&self, server: Option<usize>, seconds: f64, refused: Option<Full>) {
        self.wait.observe(seconds);
        let at = server.unwrap_or(self.refused.len() - 1);
        if let (Some(why), Some(counters)) = (refused, self.refused.get(at)) {
            counters[usize::from(why == Full::Timeout)].inc();
        }
    }
}
