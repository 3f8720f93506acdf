//! The access log's record of one finished request.

use super::RequestCtx;
use crate::pipeline::access_log::Record;
use crate::pipeline::Secure;
use pingora_proxy::Session;
use std::time::Duration;

/// What the access log says of the request `session` carried: its answer `status`, how long
/// it took, and the server that answered (by index in the router), if one did.
pub(super) fn of(
    session: &Session,
    ctx: &RequestCtx,
    status: u16,
    duration: Duration,
    server: Option<usize>,
) -> Record {
    let req = session.req_header();
    let peer = session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a| a.ip());
    let tls = Secure::of(session).map(|s| s.digest.version.clone());
    let what = (req.method.clone(), req.uri.clone(), req.version);
    of_request(ctx, peer, what, tls, (status, duration, server))
}

/// The record of a request whose method, target and version are `what`, from the
/// connection's `peer` and `tls` version, and the request's context: both engines' records.
pub fn of_request(
    ctx: &RequestCtx,
    peer: Option<std::net::IpAddr>,
    (method, uri, version): (http::Method, http::Uri, http::Version),
    tls: Option<std::borrow::Cow<'static, str>>,
    (status, duration, server): (u16, Duration, Option<usize>),
) -> Record {
    Record {
        time: std::time::SystemTime::now(),
        client: ctx.client.or(peer),
        method,
        uri,
        status,
        duration,
        router: ctx.router.clone(),
        server,
        outcome: ctx.outcome,
        rejected: ctx.rejected.is_some(),
        attempts: ctx.tried.len(),
        version,
        tls,
        route: ctx.route.clone(),
        fields: ctx.plugin_state.log_fields().to_vec(),
    }
}
