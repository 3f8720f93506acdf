//! tether's HTTP/2 front end (ALPN `h2` on TLS listeners, and h2c): a connection's streams
//! served in the connection's own task over the `h2` crate (`conn.rs`, its bounds in
//! `settings.rs`), each stream through the pipeline's steps and tries (`stream.rs`), its
//! exchange with the server over HTTP/1 (`exchange.rs`, on `crate::pipeline::upstream`), its body
//! read within the listener's limits (`body.rs`), and each answer, the server's or
//! tether's own (`answer.rs`), sent within the client's flow-control window (`send.rs`).

mod ajp;
mod answer;
mod body;
mod conn;
mod exchange;
mod files;
mod send;
mod settings;
mod stream;
mod tunnel;

use crate::metrics::VersionCounters;
use crate::pipeline::access_log::AccessLog;
use crate::state::snapshot::SharedSnapshot;
use pingora_core::connectors::{ConnectorOptions, TransportConnector};
use pingora_core::protocols::raw_connect::ProxyDigest;
use pingora_core::protocols::tls::SslDigest;
use std::net::SocketAddr;
use std::sync::Arc;

/// The HTTP/2 front end of one listener.
pub struct Http2 {
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

impl Http2 {
    pub fn new(
        snapshot: SharedSnapshot,
        listener: usize,
        name: &str,
        access_log: Option<Arc<AccessLog>>,
        options: ConnectorOptions,
    ) -> Self {
        Http2 {
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
