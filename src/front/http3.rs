//! tether's HTTP/3 front end (`listeners[].http3: true`): QUIC on the UDP port of a TLS
//! listener's address, over Cloudflare's quiche (sans-IO) driven by tether's own tasks: the
//! socket's reader routes datagrams to connections (`router.rs`, in the terms of `ids.rs`),
//! each connection is served in a task of its own (`conn.rs`), its request streams by the request streams' steps
//! (`crate::front::streams`, through `io.rs`), with the request's fields read as an HTTP/2
//! stream's are (`request.rs`).

mod conn;
mod ids;
mod io;
mod request;
mod router;

use crate::config::{Listener, ListenerLimits, ListenerTls};
use crate::front::streams::Streams;
use async_trait::async_trait;
use log::error;
use pingora_core::server::{ExecutionPhase, ListenFds, ShutdownWatch};
use pingora_core::services::Service;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::UdpSocket;
use tokio::sync::broadcast;

/// Streams a client may open at once on one connection.
const MAX_STREAMS: u64 = 100;

/// Flow-control windows: per request stream, and for the whole connection.
const STREAM_WINDOW: u64 = 256 * 1024;
const CONNECTION_WINDOW: u64 = 1024 * 1024;

/// The HTTP/3 service of one TLS listener.
pub struct Http3 {
    name: String,
    listener: String,
    address: SocketAddr,
    retry_above: usize,
    /// Where the key of its reset and Retry tokens is kept (made at the first start).
    key_file: Option<PathBuf>,
    tls: ListenerTls,
    limits: ListenerLimits,
    streams: Arc<Streams>,
    phases: Option<broadcast::Receiver<ExecutionPhase>>,
}

impl Http3 {
    /// The HTTP/3 service of `listener` (one with `tls`); its key for reset and Retry
    /// tokens is kept in `state_dir` when there is one.
    pub fn new(
        listener: &Listener,
        tls: ListenerTls,
        state_dir: Option<&Path>,
        streams: Streams,
        phases: broadcast::Receiver<ExecutionPhase>,
    ) -> Self {
        Http3 {
            name: format!("tether listener {} (HTTP/3)", listener.name),
            listener: listener.name.clone(),
            address: listener.address,
            tls,
            limits: listener.limits,
            retry_above: usize::try_from(listener.http3_retry_above).unwrap_or(usize::MAX),
            key_file: state_dir.map(|d| d.join("quic.key")),
            streams: Arc::new(streams),
            phases: Some(phases),
        }
    }

    /// quiche's settings: the listener's certificates, HTTP/3 by ALPN, its keep-alive
    /// timeout as QUIC's idle timeout, bounded streams and windows.
    fn quic_config(&self) -> Result<quiche::Config, String> {
        let ssl = crate::state::tls::quic::build_quic(&self.tls)?;
        let err = |e: quiche::Error| format!("QUIC setup: {e}");
        let mut c = quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, ssl)
            .map_err(err)?;
        c.set_application_protos(quiche::h3::APPLICATION_PROTOCOL)
            .map_err(err)?;
        c.set_max_idle_timeout(self.limits.keepalive_timeout.as_millis() as u64);
        c.set_max_recv_udp_payload_size(ids::MAX_DATAGRAM);
        c.set_max_send_udp_payload_size(ids::MAX_DATAGRAM);
        c.set_initial_max_data(CONNECTION_WINDOW);
        c.set_initial_max_stream_data_bidi_remote(STREAM_WINDOW);
        c.set_initial_max_stream_data_bidi_local(STREAM_WINDOW);
        c.set_initial_max_stream_data_uni(64 * 1024);
        c.set_initial_max_streams_bidi(MAX_STREAMS);
        c.set_initial_max_streams_uni(8);
        c.set_active_connection_id_limit(4);
        Ok(c)
    }
}

/// The listener's UDP socket: the one the old process handed over in a binary upgrade
/// (Pingora's table of listening sockets, under `udp/ADDRESS`), or a new one, put in the
/// table for the next upgrade.
fn udp_socket(address: SocketAddr, fds: Option<&ListenFds>) -> std::io::Result<UdpSocket> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // No space: Pingora sends the keys space-separated.
    let key = format!("udp/{address}");
    let handed = fds.and_then(|table| table.lock().get(&key).copied());
    let socket = match handed {
        // SAFETY: the table's descriptors are sockets this process owns, each taken by the
        // one service that listens on its address.
        Some(fd) => unsafe { std::net::UdpSocket::from_raw_fd(fd) },
        None => {
            let socket = std::net::UdpSocket::bind(address)?;
            if let Some(table) = fds {
                table.lock().add(key, socket.as_raw_fd());
            }
            socket
        }
    };
    socket.set_nonblocking(true)?;
    UdpSocket::from_std(socket)
}

#[async_trait]
impl Service for Http3 {
    async fn start_service(
        &mut self,
        fds: Option<ListenFds>,
        shutdown: ShutdownWatch,
        _listeners_per_fd: usize,
    ) {
        let quic = match self.quic_config() {
            Ok(c) => c,
            Err(e) => return error!("{}: {e}", self.name),
        };
        let h3 = match quiche::h3::Config::new() {
            Ok(c) => Arc::new(c),
            Err(e) => return error!("{}: HTTP/3 setup: {e}", self.name),
        };
        let keys = match ids::Keys::load(self.key_file.as_deref()) {
            Ok(keys) => Arc::new(keys),
            Err(e) => return error!("{}: the QUIC key: {e}", self.name),
        };
        // The address was checked free before the server started; failing here is as the
        // TCP listeners fail.
        let socket = udp_socket(self.address, fds.as_ref())
            .unwrap_or_else(|e| panic!("cannot listen on udp {}: {e}", self.address));
        let router = router::Router {
            socket: Arc::new(socket),
            local: self.address,
            quic,
            h3,
            streams: self.streams.clone(),
            shutdown,
            phases: self.phases.take().expect("a service starts once"),
            keys,
            retry_above: self.retry_above,
            sent: crate::metrics::http3_packets(&self.listener),
        };
        router.run().await;
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn listen_addresses(&self) -> Option<Vec<String>> {
        None
    }
}
