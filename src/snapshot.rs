//! The routing snapshot: one router per cluster and each listener's cluster, swapped whole.
//!
//! Requests load the current snapshot once (an `ArcSwap` load, no lock) and keep the
//! cluster's router in their context for every retry; a reload builds a new snapshot off
//! the request path, reusing live server state by name, and stores it.

use crate::config::Config;
use crate::metrics::ClusterMetrics;
use crate::routing::ClusterRouter;
use arc_swap::ArcSwap;
use std::sync::Arc;

pub struct Snapshot {
    pub clusters: Box<[Arc<ClusterRouter>]>,
    /// Metric handles of each cluster, in the same order.
    pub metrics: Box<[Arc<ClusterMetrics>]>,
    /// Listener index (order of the config) → cluster index.
    pub listeners: Box<[usize]>,
}

impl Snapshot {
    /// Builds routers for `config`, carrying live state over from `previous` by cluster
    /// and server name.
    pub fn build(config: &Config, previous: Option<&Snapshot>) -> Snapshot {
        let mut clusters = Vec::new();
        let mut metrics = Vec::new();
        for c in &config.clusters {
            let old = previous.and_then(|p| p.clusters.iter().find(|r| r.name == c.name));
            let router = ClusterRouter::new(c, old.map(|r| r.as_ref()));
            metrics.push(Arc::new(ClusterMetrics::new(
                &router,
                old.map(|r| r.as_ref()),
            )));
            clusters.push(Arc::new(router));
        }
        Snapshot {
            clusters: clusters.into(),
            metrics: metrics.into(),
            listeners: config.listeners.iter().map(|l| l.cluster).collect(),
        }
    }

    /// The router and metric handles for requests arriving on listener `listener`.
    pub fn cluster_for(&self, listener: usize) -> (&Arc<ClusterRouter>, &Arc<ClusterMetrics>) {
        let i = self.listeners[listener];
        (&self.clusters[i], &self.metrics[i])
    }
}

/// The shared, swappable snapshot.
pub type SharedSnapshot = Arc<ArcSwap<Snapshot>>;
