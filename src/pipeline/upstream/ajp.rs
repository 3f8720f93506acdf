//! The server's side of a try over AJP/1.3 (`crate::wire::ajp`): a connection asked with a
//! CPing as configured, packets read one at a time into the front end's buffer while the
//! client is watched, with a kept connection the server had closed told apart (it may go
//! again), the `FORWARD_REQUEST` of the client's facts, and the try itself for every front
//! end (`exchange.rs`).

mod exchange;

pub use exchange::{exchange, ClientSide};

use super::{Connected, Watch};
use crate::config::{Ajp, AjpPing};
use crate::pipeline::{self, Failure, RequestCtx};
use crate::pipeline::{write_on_stack, Secure};
use crate::wire::ajp::packet::frame;
use crate::wire::ajp::{Forward, Tls, TooLarge};
use pingora_core::connectors::TransportConnector;
use pingora_core::protocols::tls::SslDigest;
use pingora_core::protocols::Stream;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The server's packets on a connection, read into a buffer: `buf[pos..filled]` is read
/// and not taken yet.
pub struct Packets {
    pos: usize,
    filled: usize,
    /// Bytes came from the server on this try.
    heard: bool,
}

impl Packets {
    pub fn new() -> Self {
        Packets {
            pos: 0,
            filled: 0,
            heard: false,
        }
    }

    /// The next packet's payload, as a range of `buf`; each read of the server waits at
    /// most `timeout`. On a kept connection (`reused`), a close before any byte is `Stale`.
    pub async fn next(
        &mut self,
        up: &mut Stream,
        buf: &mut Vec<u8>,
        (max, timeout, reused): (usize, Duration, bool),
        client: &mut impl Watch,
    ) -> Result<Range<usize>, Failure> {
        if buf.len() < max {
            buf.resize(max, 0);
        }
        loop {
            match frame(&buf[self.pos..self.filled], max) {
                Ok(Some(payload)) => {
                    let at = self.pos;
                    self.pos += payload.end;
                    return Ok(at + payload.start..at + payload.end);
                }
                Ok(None) => {}
                Err(m) => return Err(Failure::Upstream(502, m.0)),
            }
            // Room for a whole packet after what is left of this one.
            if self.pos > 0 {
                buf.copy_within(self.pos..self.filled, 0);
                self.filled -= self.pos;
                self.pos = 0;
            }
            let read = tokio::select! {
                r = crate::base::poll_time::timeout(timeout, up.read(&mut buf[self.filled..])) => r,
                () = std::future::poll_fn(|cx| client.poll_gone(cx)) => {
                    return Err(Failure::Client(499))
                }
            };
            match read {
                Err(_) => return Err(Failure::Timeout),
                Ok(Ok(0)) | Ok(Err(_)) if reused && !self.heard => return Err(Failure::Stale),
                Ok(Ok(0)) | Ok(Err(_)) if !self.heard => {
                    return Err(Failure::Dropped(pipeline::DROPPED))
                }
                Ok(Ok(0)) => {
                    return Err(Failure::Upstream(502, "the server closed the connection"))
                }
                Ok(Err(_)) => return Err(Failure::Upstream(502, "reading the answer failed")),
                Ok(Ok(n)) => {
                    self.filled += n;
                    self.heard = true;
                }
            }
        }
    }

    /// Nothing was read past the last packet taken: the connection may carry another
    /// request.
    pub fn clean(&self) -> bool {
        self.pos == self.filled
    }
}

impl Default for Packets {
    fn default() -> Self {
        Packets::new()
    }
}

/// The server's answer fields, as the pipeline reads them.
pub struct AjpFields<'a>(pub crate::wire::ajp::ResponseHeaders<'a>);

impl crate::routing::Fields for AjpFields<'_> {
    fn values<'a>(
        &'a self,
        name: &'a http::HeaderName,
    ) -> impl DoubleEndedIterator<Item = &'a [u8]> + 'a {
        // Collected: the fields are read again from the packet, forwards only.
        let values: Vec<&[u8]> = self
            .0
            .clone()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_str().as_bytes()))
            .map(|(_, v)| v)
            .collect();
        values.into_iter()
    }
}

/// The server's answer head does what the pipeline says (`pipeline::heard`): `Ok(true)`
/// for the final head, `Ok(false)` for an interim one (not relayed over AJP: the final one
/// follows), or how the try failed.
pub fn heard(
    ctx: &mut RequestCtx,
    status: u16,
    fields: crate::wire::ajp::ResponseHeaders<'_>,
    may_retry: impl FnOnce() -> bool,
) -> Result<bool, Failure> {
    let heard = pipeline::heard(ctx, status, &AjpFields(fields), may_retry);
    Failure::after_head(heard, status)
}

/// A connection for a try over AJP: a kept one or a new one, then asked with a CPing as
/// `settings.ping` says.
pub async fn connection(
    connector: &TransportConnector,
    ctx: &RequestCtx,
    settings: &Ajp,
) -> Result<Connected, Failure> {
    let mut connected = match super::kept(ctx) {
        Ok(kept) => kept,
        Err(new) => super::connect(connector, ctx, new).await?,
    };
    let idle = connected.reused.then_some(connected.idle);
    ready(&mut connected.stream, settings, idle).await?;
    Ok(connected)
}

/// Asks the server with a CPing before a request goes on `up` (a connection made now, or
/// kept, `idle` that long), as `settings.ping` and `ping_interval` say. A CPong not in
/// `ping_timeout` is a failed connect: the server is marked down and the request goes to
/// another (nothing of it was sent); a kept connection the server had closed is `Stale`.
async fn ready(up: &mut Stream, settings: &Ajp, idle: Option<Duration>) -> Result<(), Failure> {
    let reused = idle.is_some();
    let idle_long = match (idle, settings.ping_interval) {
        (Some(idle), Some(interval)) => idle >= interval,
        _ => false,
    };
    let ask = idle_long
        || match settings.ping {
            AjpPing::Never => false,
            AjpPing::Connect => !reused,
            AjpPing::Request => true,
        };
    if !ask {
        return Ok(());
    }
    match crate::base::poll_time::timeout(settings.ping_timeout, cping(up)).await {
        Ok(Ok(true)) => Ok(()),
        Ok(Ok(false)) => Err(Failure::Connect(
            "the answer to a CPing was not a CPong".into(),
        )),
        Ok(Err(_)) if reused => Err(Failure::Stale),
        Ok(Err(e)) => Err(Failure::Connect(format!("AJP CPing: {e}"))),
        Err(_) => Err(Failure::Connect(format!(
            "no CPong in {:?} (ping_timeout)",
            settings.ping_timeout
        ))),
    }
}

/// A CPing on `s`: was its answer a CPong?
pub async fn cping<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> std::io::Result<bool> {
    let mut ping = Vec::with_capacity(5);
    crate::wire::ajp::cping(&mut ping);
    s.write_all(&ping).await?;
    let mut pong = [0u8; 5];
    s.read_exact(&mut pong).await?;
    Ok(pong == crate::wire::ajp::CPONG_PACKET)
}

/// What a front end knows of a request, for its `FORWARD_REQUEST`.
pub struct Request<'a> {
    pub method: &'a [u8],
    /// `HTTP/1.1`, `HTTP/2.0`, ...
    pub protocol: &'static [u8],
    pub path: &'a [u8],
    pub query: Option<&'a [u8]>,
    /// The host the client addressed (`Host`, or HTTP/2's `:authority`).
    pub host: Option<&'a [u8]>,
}

/// The client's connection: its peer, the address it came to, its TLS.
pub type Link = (
    Option<SocketAddr>,
    Option<SocketAddr>,
    Option<Arc<SslDigest>>,
);

/// The request as `FORWARD_REQUEST` in `out` (cleared), with the client's facts as AJP
/// carries them (its address as tether names it, the host and port it addressed, its TLS
/// and certificate), the route of the try's server and the connector's secret; `fields`
/// gives the fields to send each time it is called.
pub fn forward<'h, I: Iterator<Item = (&'h [u8], &'h [u8])>>(
    out: &mut Vec<u8>,
    ctx: &RequestCtx,
    settings: &Ajp,
    (r, (peer, local, tls)): (Request<'_>, Link),
    fields: impl Fn() -> I,
) -> Result<(), TooLarge> {
    let router = ctx.router.as_ref().expect("a routed request");
    let server = &router.servers()[ctx.server.expect("a routed request")].config;
    // The port goes with the peer's address only: a client named by `X-Forwarded-For`
    // came with none (Tomcat then reads the port of tether's connection, as behind
    // `RemoteIpValve`).
    let remote_port = match (ctx.client, peer) {
        (Some(client), Some(peer)) if client != peer.ip() => None,
        (_, peer) => peer.map(|p| p.port()),
    };
    let mut client = [0u8; 48];
    let client = ctx
        .client
        .or(peer.map(|p| p.ip()))
        .map(|ip| write_on_stack(&mut client, ip));
    let mut local_text = [0u8; 48];
    let local_ip = local.map(|a| write_on_stack(&mut local_text, a.ip()));
    let local_port = local.map_or(0, |a| a.port());
    let (server_name, server_port) = match r.host {
        Some(h) => pipeline::host_and_port(h, local_port),
        None => (local_ip.unwrap_or(b"localhost"), local_port),
    };
    let secure = tls.map(|digest| Secure { digest });
    let pem = secure.as_ref().and_then(Secure::client_cert_pem);
    let conn_tls = secure.as_ref().and_then(Secure::conn);
    let tls = secure.as_ref().map(|s| Tls {
        cipher: s.cipher().as_bytes(),
        session_id: conn_tls
            .and_then(|t| t.session_id.as_deref())
            .map(str::as_bytes),
        key_size: conn_tls
            .and_then(|t| t.cipher_bits)
            .and_then(|b| u16::try_from(b).ok()),
        protocol: s.digest.version.as_bytes(),
        cert_pem: pem.as_deref().map(str::as_bytes),
    });
    let f = Forward {
        method: r.method,
        protocol: r.protocol,
        path: r.path,
        query: r.query,
        remote_addr: client.unwrap_or(b""),
        remote_port,
        local_addr: local_ip,
        server_name,
        server_port,
        tls,
        route: Some(server.route.as_bytes()),
        secret: settings.secret.as_deref().map(str::as_bytes),
    };
    out.clear();
    crate::wire::ajp::forward_request(out, &f, fields, settings.packet_size)
}
