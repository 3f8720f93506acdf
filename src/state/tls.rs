//! TLS: listeners terminate it (tether does the handshake itself, in the listener's
//! connection loop, so its acceptor is swapped whole on reload and the handshake is bounded
//! by the listener's head deadline), and clusters may speak it to their servers.
//!
//! Everything here is built from the validated config, off the request path: at start and
//! on each reload. A file that does not load fails the reload and the old acceptor keeps
//! serving.

pub mod acceptor;
pub mod conn;
pub mod quic;
pub mod record_reads;
pub mod upstream;

pub use acceptor::{build_acceptor, build_service, Acceptor};
pub use conn::ConnTls;
pub use upstream::{build_upstream, UpstreamTls};

use crate::config::Config;
use std::sync::Arc;

/// Acceptors of every listener of `config` (None for plain ones), in config order.
pub fn build_listeners(config: &Config) -> Result<Vec<Option<Arc<Acceptor>>>, String> {
    config
        .listeners
        .iter()
        .map(|l| match &l.tls {
            Some(tls) => build_acceptor(tls)
                .map(|a| Some(Arc::new(a)))
                .map_err(|e| format!("listener {}: {e}", l.name)),
            None => Ok(None),
        })
        .collect()
}

/// TLS to the servers of every cluster of `config` (None for plain ones), in config order.
pub fn build_clusters(config: &Config) -> Result<Vec<Option<Arc<UpstreamTls>>>, String> {
    config
        .clusters
        .iter()
        .map(|c| match &c.tls {
            Some(tls) => build_upstream(tls)
                .map(|u| Some(Arc::new(u)))
                .map_err(|e| format!("cluster {}: {e}", c.name)),
            None => Ok(None),
        })
        .collect()
}
