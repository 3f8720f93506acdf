//! A listener's host and path routes applied to one request: the cluster they choose, or the
//! answer they give themselves (404 for an exclusion, a fixed response, a redirect).

use super::respond::{self, Conn};
use super::{request, RequestCtx};
use crate::config::RouteAction;
use crate::routes::Found;
use crate::snapshot::ListenerRoutes;
use pingora_core::Result;
use pingora_proxy::Session;

/// What the routes made of a request.
pub(super) enum Step {
    /// Go on to cluster `start` (the listener's default when no route matched), chosen by
    /// route `route`, if any.
    Cluster {
        start: Option<usize>,
        route: Option<usize>,
    },
    /// The request was answered.
    Answered,
}

pub(super) async fn apply(
    session: &mut Session,
    ctx: &mut RequestCtx,
    listener_routes: &ListenerRoutes,
    default: Option<usize>,
) -> Result<Step> {
    let mut start = default;
    let mut route = None;
    if listener_routes.table.is_empty() {
        return Ok(Step::Cluster { start, route });
    }
    let port = session
        .server_addr()
        .and_then(|a| a.as_inet())
        .map_or(0, |a| a.port());
    let req = session.req_header();
    let (host, port) = request::request_host(req, port);
    let found = listener_routes
        .table
        .find(host, port, req.uri.path().as_bytes());
    match found {
        Found::Route(i) | Found::Excluded(i) => {
            let info = &listener_routes.routes[i];
            info.hits.inc();
            ctx.route = Some(info.name.clone());
            if matches!(found, Found::Excluded(_)) {
                respond::plain(session, 404, respond::error_body(404), Conn::KeepAlive).await?;
                return Ok(Step::Answered);
            }
            match &info.action {
                RouteAction::Cluster(c) => {
                    start = Some(*c);
                    route = Some(i);
                }
                RouteAction::Respond { status, body } => {
                    respond::plain(session, *status, body.clone(), Conn::KeepAlive).await?;
                    return Ok(Step::Answered);
                }
                RouteAction::Redirect { to, status } => {
                    respond::redirect(session, *status, to).await?;
                    return Ok(Step::Answered);
                }
            }
        }
        Found::None => {}
    }
    Ok(Step::Cluster { start, route })
}
