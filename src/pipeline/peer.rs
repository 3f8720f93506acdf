//! The peer of a request's server (plain, or TLS as the cluster's `upstream_tls` says, with
//! the cluster's timeouts), and why a connection to it failed, in words: both front ends
//! use them.

use super::RequestCtx;
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

/// Why a connection to `peer` failed, for people (`crate::pipeline::reason`); Pingora's error goes
/// to the debug log.
pub fn why_failed(e: &pingora_error::Error, peer: &HttpPeer) -> String {
    log::debug!("{peer}: {e}");
    crate::pipeline::reason::of(e, &peer._address, peer.options.connection_timeout)
}
