//! The peer of a request's server (plain, or TLS as the cluster's `upstream_tls` says, with
//! the cluster's timeouts), and what a failed connection to it does: both engines use them.

use super::RequestCtx;
use crate::routing::now_ms;
use log::warn;
use pingora_core::upstreams::peer::HttpPeer;

/// The peer for `slot`, a server of the request's cluster: plain, or TLS as the cluster's
/// `upstream_tls` says, with the cluster's timeouts.
pub fn http_peer(
    ctx: &RequestCtx,
    slot: &crate::routing::ServerSlot,
    timeouts: crate::routing::Timeouts,
) -> HttpPeer {
    let mut peer = match &ctx.upstream_tls {
        None => HttpPeer::new(slot.config.address, false, String::new()),
        Some(tls) => {
            let sni = tls.sni.as_deref().or(slot.config.host.as_deref());
            let mut peer = HttpPeer::new(slot.config.address, true, sni.unwrap_or("").to_string());
            peer.options.verify_cert = tls.verify;
            peer.options.verify_hostname = tls.verify;
            peer.options.ca = tls.ca.clone();
            peer.client_cert_key = tls.client_cert.clone();
            peer
        }
    };
    peer.options.connection_timeout = Some(timeouts.connect);
    peer.options.read_timeout = Some(timeouts.read);
    peer.options.idle_timeout = Some(timeouts.idle);
    peer
}

/// The server answered a `fail_on_status` status (mod_jk): it is in error, and marked
/// down.
pub fn status_failed(
    router: &crate::routing::ClusterRouter,
    slot: &crate::routing::ServerSlot,
    status: u16,
) {
    let why = format!(
        "answered {status}, a fail_on_status status ({})",
        slot.config.address
    );
    if slot.live.mark_down_because(now_ms(), &why) {
        warn!(
            "cluster {} server {} marked down: {why}",
            router.name, slot.config.name
        );
    }
}

/// Why a connection to `peer` failed, for people (`crate::reason`); Pingora's error goes
/// to the debug log.
pub fn why_failed(e: &pingora_error::Error, peer: &HttpPeer) -> String {
    log::debug!("{peer}: {e}");
    crate::reason::of(e, &peer._address, peer.options.connection_timeout)
}

/// A connection to the request's current server failed: the server is marked down, and
/// the answer says whether another try is allowed (`max_attempts`).
pub fn connect_failed(ctx: &RequestCtx, why: &str) -> bool {
    let (Some(router), Some(i)) = (&ctx.router, ctx.server) else {
        return false;
    };
    let slot = &router.servers()[i];
    if let Some(m) = &ctx.metrics {
        m.connect_failed(i);
    }
    if slot.live.mark_down_because(now_ms(), why) {
        warn!(
            "cluster {} server {} marked down: {why}",
            router.name, slot.config.name
        );
    }
    ctx.tried.len() < router.max_attempts as usize
}
