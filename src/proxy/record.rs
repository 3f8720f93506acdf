//! The access log's record of one finished request.

use super::{secure, RequestCtx};
use crate::access_log::Record;
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
    Record {
        time: std::time::SystemTime::now(),
        client: ctx.client.or_else(|| {
            session
                .client_addr()
                .and_then(|a| a.as_inet())
                .map(|a| a.ip())
        }),
        method: req.method.clone(),
        uri: req.uri.clone(),
        status,
        duration,
        router: ctx.router.clone(),
        server,
        outcome: ctx.outcome,
        rejected: ctx.rejected.is_some(),
        attempts: ctx.tried.len(),
        version: req.version,
        tls: secure::Secure::of(session).map(|s| s.digest.version.clone()),
        route: ctx.route.clone(),
    }
}
