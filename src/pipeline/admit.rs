//! A request's steps before a cluster is chosen, for every front end: the client's
//! address, the per-client request rate, the HTTPS redirect, and the host and path routes,
//! which choose the cluster or answer themselves.

use super::answer::{https_host, Answer};
use super::{client_of, Front, RequestCtx};
use crate::config::{Files, RouteAction};
use crate::routing::ms_at;
use crate::routing::routes::Found;
use crate::state::snapshot::Snapshot;
use std::sync::Arc;
use tether_plugins::Chain;

/// Where a request goes after its first steps: what it borrows of the snapshot (`'s`)
/// outlives what an answer borrows of the request (`'a`).
pub enum Admitted<'s, 'a> {
    /// To cluster `cluster`, chosen by a route with these plugins, if any.
    Cluster {
        cluster: usize,
        route_chain: Option<&'s Chain>,
    },
    /// tether answers it.
    Answer(Answer<'a>),
    /// A file from this directory answers it.
    Files(&'s Arc<Files>),
}

/// The first steps of a request to listener `listener`.
pub fn admit<'s: 'a, 'a>(
    snapshot: &'s Snapshot,
    listener: usize,
    ctx: &mut RequestCtx,
    front: &'a impl Front,
) -> Admitted<'s, 'a> {
    let default = snapshot.listeners[listener];
    ctx.client = client_of(front.peer(), front, &snapshot.trusted_proxies[listener]);
    if let (Some(limiter), Some(client)) = (&snapshot.client_limits[listener], ctx.client) {
        if let Err(retry_after) = limiter.admit_request(client, ms_at(ctx.start)) {
            ctx.metrics = default.map(|d| snapshot.metrics[d].clone());
            let retry_after_secs = retry_after.as_secs().max(1);
            return Admitted::Answer(Answer::TooMany { retry_after_secs });
        }
    }
    if let Some(redirect) = snapshot.redirects[listener] {
        ctx.metrics = default.map(|d| snapshot.metrics[d].clone());
        return Admitted::Answer(match https_host(front.host().unwrap_or_default()) {
            Some(host) => Answer::ToHttps {
                redirect,
                host,
                origin: front.origin(),
            },
            None => Answer::NoHost,
        });
    }
    ctx.forwarded = snapshot.forwarded[listener];
    ctx.body_limit = ctx.limits.max_request_body;
    let routes = &snapshot.routes[listener];
    let mut start = default;
    let mut route_chain = None;
    if !routes.table.is_empty() {
        let host = front.host().unwrap_or_default();
        let (host, port) = super::host_and_port(host, front.local_port());
        let origin = front.origin();
        let path = origin.split(|&b| b == b'?').next().unwrap_or(origin);
        match routes.table.find(host, port, path) {
            found @ (Found::Route(i) | Found::Excluded(i)) => {
                let info = &routes.routes[i];
                info.hits.inc();
                ctx.route_at = Some(i);
                if let Some(limit) = info.max_request_body {
                    ctx.body_limit = limit;
                }
                ctx.route = Some(info.name.clone());
                ctx.metrics = start.map(|d| snapshot.metrics[d].clone());
                if matches!(found, Found::Excluded(_)) {
                    return match &snapshot.listener_files[listener] {
                        Some(files) => Admitted::Files(files),
                        None => Admitted::Answer(Answer::NotFound),
                    };
                }
                match &info.action {
                    RouteAction::Cluster(cluster) => {
                        start = Some(*cluster);
                        route_chain = Some(&*info.chain);
                    }
                    RouteAction::Respond { status, body } => {
                        return Admitted::Answer(Answer::Route {
                            status: *status,
                            body,
                        })
                    }
                    RouteAction::Redirect { to, status } => {
                        return Admitted::Answer(Answer::Redirect {
                            status: *status,
                            to,
                        })
                    }
                    RouteAction::Serve(files) => return Admitted::Files(files),
                }
            }
            Found::None => {}
        }
    }
    match start {
        Some(_) if declared_too_large(ctx, front) => Admitted::Answer(Answer::Refusal {
            status: 413,
            why: TOO_LARGE,
        }),
        Some(cluster) => {
            if let Some(settings) = compress_for(snapshot, listener, ctx) {
                let accept = front.first(&http::header::ACCEPT_ENCODING);
                ctx.compress = Some(crate::pipeline::compress::Asked::of(settings, accept));
            }
            Admitted::Cluster {
                cluster,
                route_chain,
            }
        }
        None => match &snapshot.listener_files[listener] {
            Some(files) => Admitted::Files(files),
            None => Admitted::Answer(Answer::NotFound),
        },
    }
}

/// Why a body larger than `max_request_body` is refused (413).
pub const TOO_LARGE: &str =
    "413 Content Too Large: the request body is larger than this server takes\n";

/// Does the request's `Content-Length` say its body is larger than its bound? Then it is
/// refused before a server is chosen, as Apache's `LimitRequestBody` does.
fn declared_too_large(ctx: &RequestCtx, front: &impl Front) -> bool {
    ctx.body_limit > 0
        && front
            .first(&http::header::CONTENT_LENGTH)
            .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok())
            .is_some_and(|n| n > ctx.body_limit)
}

/// The `compress` settings for a request of listener `listener`: its route's, else the
/// listener's.
pub fn compress_for<'s>(
    snapshot: &'s Snapshot,
    listener: usize,
    ctx: &RequestCtx,
) -> Option<&'s Arc<crate::config::Compress>> {
    match ctx
        .route_at
        .and_then(|i| snapshot.routes[listener].routes.get(i))
    {
        Some(route) => route.compress.as_ref(),
        None => snapshot.listener_compress.get(listener)?.as_ref(),
    }
}

/// The pages that may answer a request, most specific first.
pub type ErrorPages3<'s> = [Option<&'s crate::config::ErrorPages>; 3];

/// The `error_pages` for a request of listener `listener`, most specific first: its
/// route's, its cluster's, the listener's.
pub fn pages<'s>(snapshot: &'s Snapshot, listener: usize, ctx: &RequestCtx) -> ErrorPages3<'s> {
    let route = ctx
        .route_at
        .and_then(|i| snapshot.routes[listener].routes.get(i))
        .and_then(|r| r.error_pages.as_ref());
    let cluster = ctx
        .cluster_at
        .and_then(|c| snapshot.cluster_pages.get(c))
        .and_then(Option::as_ref);
    let own = snapshot
        .listener_pages
        .get(listener)
        .and_then(Option::as_ref);
    [route, cluster, own]
}
