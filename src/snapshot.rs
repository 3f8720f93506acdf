//! The routing snapshot: one router per cluster and each listener's cluster, swapped whole.
//!
//! Requests load the current snapshot once (an `ArcSwap` load, no lock) and keep the
//! cluster's router in their context for every retry; a reload builds a new snapshot off
//! the request path, reusing live server state by name, and stores it.

use crate::config::Config;
use crate::routing::ClusterRouter;
use arc_swap::ArcSwap;
use std::sync::Arc;

pub struct Snapshot {
    pub clusters: Box<[Arc<ClusterRouter>]>,
    /// Listener index (order of the config) → cluster index.
    pub listeners: Box<[usize]>,
}

impl Snapshot {
    /// Builds routers for `config`, carrying live state over from `previous` by cluster
    /// and server name.
    pub fn build(config: &Config, previous: Option<&Snapshot>) -> Snapshot {
        let clusters = config
            .clusters
            .iter()
            .map(|c| {
                let old = previous.and_then(|p| p.clusters.iter().find(|r| r.name == c.name));
                Arc::new(ClusterRouter::new(c, old.map(|r| r.as_ref())))
            })
            .collect();
        Snapshot {
            clusters,
            listeners: config.listeners.iter().map(|l| l.cluster).collect(),
        }
    }

    /// The router for requests arriving on listener `listener`.
    pub fn router_for(&self, listener: usize) -> &Arc<ClusterRouter> {
        &self.clusters[self.listeners[listener]]
    }
}

/// The shared, swappable snapshot.
pub type SharedSnapshot = Arc<ArcSwap<Snapshot>>;
