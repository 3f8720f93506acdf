//! The request streams of tether's multiplexed front ends (HTTP/2, HTTP/3), written once
//! over what a stream gives (`io.rs`): each stream through the pipeline's steps and tries
//! (`stream.rs`), its exchange with the server over HTTP/1 (`exchange.rs`, on
//! `crate::pipeline::upstream`) or AJP (`ajp.rs`), its body read within the listener's
//! limits (`body.rs`), each answer, the server's or tether's own (`answer.rs`, `files.rs`),
//! sent within the client's flow-control window (`send.rs`), and WebSockets over extended
//! `CONNECT` (`tunnel.rs`).

mod ajp;
mod answer;
mod body;
mod exchange;
mod files;
pub mod io;
mod send;
mod stream;
mod tunnel;

pub use stream::Served;

use crate::metrics::VersionCounters;
use crate::pipeline::access_log::AccessLog;
use crate::state::snapshot::SharedSnapshot;
use pingora_core::connectors::{ConnectorOptions, TransportConnector};
use pingora_core::protocols::raw_connect::ProxyDigest;
use pingora_core::protocols::tls::SslDigest;
use std::net::SocketAddr;
use std::sync::Arc;

/// The multiplexed front ends' part of one listener: what its streams share.
pub struct Streams {
    snapshot: SharedSnapshot,
    listener: usize,
    name: Arc<str>,
    access_log: Option<Arc<AccessLog>>,
    versions: VersionCounters,
    connector: TransportConnector,
    /// Most idle connections kept per server and thread.
    pool_size: usize,
    /// WebSockets over extended CONNECT, open and ended.
    tunnels: crate::metrics::Tunnels,
}

/// What the streams of a connection share: its addresses, and the facts of its TLS and of
/// its PROXY header.
pub struct Link {
    /// The client's address and port (a PROXY header's, when the listener takes one).
    pub peer: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    pub tls: Option<Arc<SslDigest>>,
    pub proxy: Option<Arc<ProxyDigest>>,
}

impl Streams {
    /// The listener's limits, as the current config has them.
    pub fn limits(&self) -> crate::config::ListenerLimits {
        self.snapshot.load().limits[self.listener]
    }

    /// Adds the listener's `Alt-Svc` (it serves HTTP/3) to an HTTP/2 answer's head: over
    /// HTTP/3 the client knows already.
    fn alt_svc(&self, version: http::Version, head: &mut http::Response<()>) {
        if version != http::Version::HTTP_2 {
            return;
        }
        if let Some(alt_svc) = &self.snapshot.load().alt_svc[self.listener] {
            head.headers_mut()
                .insert(http::header::ALT_SVC, alt_svc.clone());
        }
    }

    /// The listener's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn new(
        snapshot: SharedSnapshot,
        listener: usize,
        name: &str,
        access_log: Option<Arc<AccessLog>>,
        options: ConnectorOptions,
    ) -> Self {
        Streams {
            pool_size: options.keepalive_pool_size,
            snapshot,
            listener,
            name: name.into(),
            access_log,
            versions: VersionCounters::new(name),
            tunnels: crate::metrics::Tunnels::new(name),
            connector: TransportConnector::new(Some(options)),
        }
    }
}
