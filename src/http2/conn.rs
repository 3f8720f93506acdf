//! One HTTP/2 connection on tether's front end, in one task: its streams are accepted and
//! served side by side in that task (their server connections come from this thread's
//! pool), a stop sends GOAWAY and lets the streams in flight end, a connection idle for the
//! listener's `keepalive_timeout` is closed, and one whose client resets most of the
//! streams it opens (rapid reset) is ended.

use super::settings;
use super::stream::Served;
use crate::access_log::AccessLog;
use crate::metrics::VersionCounters;
use crate::snapshot::SharedSnapshot;
use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use log::debug;
use pingora_core::connectors::{ConnectorOptions, TransportConnector};
use pingora_core::protocols::raw_connect::ProxyDigest;
use pingora_core::protocols::tls::SslDigest;
use pingora_core::protocols::Stream;
use pingora_core::server::ShutdownWatch;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// The HTTP/2 front end of one listener.
pub struct Http2 {
    pub(super) snapshot: SharedSnapshot,
    pub(super) listener: usize,
    pub(super) name: Arc<str>,
    pub(super) access_log: Option<Arc<AccessLog>>,
    pub(super) versions: VersionCounters,
    pub(super) connector: TransportConnector,
    /// Most idle connections kept per server and thread.
    pub(super) pool_size: usize,
}

/// What the streams of a connection share: its addresses, and the facts of its TLS and of
/// its PROXY header.
pub struct Link {
    pub peer: Option<IpAddr>,
    pub local: Option<SocketAddr>,
    pub tls: Option<Arc<SslDigest>>,
    pub proxy: Option<Arc<ProxyDigest>>,
}

/// How long a connection that was told to go away (GOAWAY) may take to end when no stream
/// is left: a client that does not read the GOAWAY does not keep it.
const GOAWAY_DRAIN: Duration = Duration::from_secs(5);

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
            connector: TransportConnector::new(Some(options)),
        }
    }

    /// Serves the connection (its client preface not read yet) until it ends.
    pub async fn serve(&self, stream: Stream, link: Link, mut shutdown: ShutdownWatch) {
        let limits = self.snapshot.load().limits[self.listener];
        let handshake = settings::builder(&limits).handshake::<_, Bytes>(stream);
        let mut conn = match crate::poll_time::timeout(limits.request_head_timeout, handshake).await
        {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return debug!("listener {}: HTTP/2 handshake: {e}", self.name),
            Err(_) => return debug!("listener {}: HTTP/2 handshake timed out", self.name),
        };
        let mut streams = FuturesUnordered::new();
        let (mut opened, mut reset) = (0u64, 0u64);
        let mut closing = false;
        let idle = tokio::time::sleep(limits.keepalive_timeout);
        tokio::pin!(idle);
        loop {
            if *shutdown.borrow() && !closing {
                conn.graceful_shutdown();
                closing = true;
            }
            tokio::select! {
                biased;
                _ = shutdown.changed(), if !closing => {
                    conn.graceful_shutdown();
                    closing = true;
                }
                Some(served) = streams.next(), if !streams.is_empty() => {
                    if served == Served::ResetByClient {
                        reset += 1;
                    }
                    if reset > settings::SERVED_RESETS && 2 * reset > opened {
                        crate::metrics::client_closed(&self.name, "http2_rapid_reset");
                        conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                        closing = true;
                    }
                    if streams.is_empty() {
                        let wait = if closing { GOAWAY_DRAIN } else { limits.keepalive_timeout };
                        idle.as_mut().reset(tokio::time::Instant::now() + wait);
                    }
                }
                accepted = conn.accept() => match accepted {
                    Some(Ok((request, respond))) => {
                        opened += 1;
                        streams.push(self.stream(request, respond, &link));
                    }
                    Some(Err(e)) => {
                        debug!("listener {}: HTTP/2 connection: {e}", self.name);
                        break;
                    }
                    None => break,
                },
                () = &mut idle, if streams.is_empty() => {
                    if closing {
                        break;
                    }
                    conn.graceful_shutdown();
                    closing = true;
                    idle.as_mut().reset(tokio::time::Instant::now() + GOAWAY_DRAIN);
                }
            }
        }
    }
}
