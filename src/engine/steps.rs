//! The proxy core's steps of one request on tether's engine, over the engine's view of it:
//! the client address, the per-client rate, host and path routes, the routing decision,
//! the tries of servers until one answers or no retry is allowed, tether's own answers, and
//! the request's metrics and access-log record.

use super::answer;
use super::conn::Conn;
use super::exchange::{self, Failure, Request};
use super::serve::Engine;
use super::upload::Stop;
use crate::access_log::Record;
use crate::config::RouteAction;
use crate::http1::head::RequestHead;
use crate::proxy::{self, RequestCtx};
use crate::routes::Found;
use crate::routing::{ms_at, now_ms, Decision, Fields, Reject};
use crate::snapshot::Snapshot;
use http::HeaderName;
use std::sync::Arc;

/// Bound on tries of one request (pingora-proxy's; tether's `max_attempts` is lower).
const MAX_TRIES: usize = 16;

/// A request's fields, read from the engine's buffer.
struct View<'a>(&'a Conn);

impl Fields for View<'_> {
    fn values<'a>(
        &'a self,
        name: &'a HeaderName,
    ) -> impl DoubleEndedIterator<Item = &'a [u8]> + 'a {
        self.0.head.values(&self.0.buf, name.as_str())
    }
}

impl Engine {
    /// The proxy core's steps and the tries: the status answered, and whether the client's
    /// connection goes on.
    pub(super) async fn process(
        &self,
        c: &mut Conn,
        ctx: &mut RequestCtx,
        snapshot: &Arc<Snapshot>,
        req: &mut Request,
    ) -> (u16, bool) {
        let default = snapshot.listeners[self.listener];
        let counters = &self.versions;
        match c.head.minor {
            0 => counters.http10.inc(),
            _ => counters.http11.inc(),
        }
        ctx.client = proxy::client_of(c.peer, &View(c), &snapshot.trusted_proxies[self.listener]);
        if let (Some(limiter), Some(client)) = (&snapshot.client_limits[self.listener], ctx.client)
        {
            if let Err(retry_after) = limiter.admit_request(client, ms_at(ctx.start)) {
                ctx.metrics = default.map(|d| snapshot.metrics[d].clone());
                let mut digits = [0u8; 48];
                let secs = proxy::write_on_stack(&mut digits, retry_after.as_secs().max(1));
                let body = proxy::error_body(429).as_bytes();
                answer::plain(
                    &mut c.out,
                    429,
                    body,
                    !req.keeps(),
                    Some(("Retry-After", secs)),
                );
                return self.answered(c, 429, req).await;
            }
        }
        if let Some(redirect) = snapshot.redirects[self.listener] {
            ctx.metrics = default.map(|d| snapshot.metrics[d].clone());
            let host = c.head.values(&c.buf, http::header::HOST.as_str()).next();
            let Some(host) = proxy::https_host(host.unwrap_or_default()) else {
                // As pingora-proxy's path: refused, and the connection closes.
                let no_host = proxy::NO_HOST.as_bytes();
                answer::plain(&mut c.out, 400, no_host, true, None);
                return (self.answered(c, 400, req).await.0, false);
            };
            let origin = origin(&c.head, &c.buf);
            answer::to_https(&mut c.out, redirect, host, origin, !req.keeps());
            return self.answered(c, redirect.status, req).await;
        }
        ctx.forwarded = snapshot.forwarded[self.listener];
        let routes = &snapshot.routes[self.listener];
        let mut start = default;
        let mut route_chain = None;
        if !routes.table.is_empty() {
            let view = View(c);
            let host = view.first(&http::header::HOST).unwrap_or_default();
            let port = c.local.map_or(0, |a| a.port());
            let (host, port) = proxy::host_and_port(host, port);
            let origin = origin(&c.head, &c.buf);
            let path = origin.split(|&b| b == b'?').next().unwrap_or(origin);
            match routes.table.find(host, port, path) {
                found @ (Found::Route(i) | Found::Excluded(i)) => {
                    let info = &routes.routes[i];
                    info.hits.inc();
                    ctx.route = Some(info.name.clone());
                    ctx.metrics = start.map(|d| snapshot.metrics[d].clone());
                    if matches!(found, Found::Excluded(_)) {
                        let body = proxy::error_body(404).as_bytes();
                        answer::plain(&mut c.out, 404, body, !req.keeps(), None);
                        return self.answered(c, 404, req).await;
                    }
                    match &info.action {
                        RouteAction::Cluster(cluster) => {
                            start = Some(*cluster);
                            route_chain = Some(&*info.chain);
                        }
                        RouteAction::Respond { status, body } => {
                            answer::plain(&mut c.out, *status, body.as_bytes(), !req.keeps(), None);
                            return self.answered(c, *status, req).await;
                        }
                        RouteAction::Redirect { to, status } => {
                            let location = Some(("Location", to.as_bytes()));
                            answer::plain(&mut c.out, *status, b"", !req.keeps(), location);
                            return self.answered(c, *status, req).await;
                        }
                    }
                }
                Found::None => {}
            }
        }
        let Some(mut cluster) = start else {
            let body = proxy::error_body(404).as_bytes();
            answer::plain(&mut c.out, 404, body, !req.keeps(), None);
            return self.answered(c, 404, req).await;
        };
        if snapshot.has_plugins() {
            // Boxed: a request without plugins does not carry their future.
            let chosen = Box::pin(self.plugins(c, ctx, snapshot, cluster, route_chain)).await;
            match chosen {
                Ok(chosen) => cluster = chosen,
                Err(a) => {
                    // Counted under the cluster the request was headed for.
                    ctx.metrics = Some(snapshot.metrics[cluster].clone());
                    let body = a.body.as_bytes();
                    answer::with_fields(&mut c.out, a.status, &a.headers, body, !req.keeps());
                    return self.answered(c, a.status, req).await;
                }
            }
        }
        ctx.router = Some(snapshot.clusters[cluster].clone());
        ctx.metrics = Some(snapshot.metrics[cluster].clone());
        ctx.upstream_tls = snapshot.upstream_tls[cluster].clone();
        ctx.ssl_headers = snapshot.ssl_headers[cluster].clone();
        let first = self.decide_only(c, ctx, ms_at(ctx.start));
        let mut decision = self.settled(c, ctx, first).await;
        ctx.count_decision(decision);
        let mut tries = 0;
        loop {
            tries += 1;
            let (server, outcome) = match decision {
                Decision::Route { server, outcome } => (server, outcome),
                Decision::Reject(reason) => return self.refused(c, ctx, reason, req).await,
            };
            if !ctx.tried.is_empty() {
                if let Some(m) = &ctx.metrics {
                    m.retried();
                }
            }
            ctx.release();
            let router = ctx.router.clone().expect("set above");
            router.servers()[server].live.start();
            ctx.tried.push(server);
            ctx.server = Some(server);
            ctx.outcome = Some(outcome);
            ctx.connect_start = Some(crate::poll_time::now());
            let failure =
                match exchange::attempt(&self.connector, (&self.name, &self.tunnels), c, ctx, req)
                    .await
                {
                    Ok(relayed) => return (relayed.status, relayed.client_keep),
                    Err(f) => f,
                };
            let retry = tries < MAX_TRIES;
            match failure {
                Failure::Connect(why) => {
                    if proxy::connect_failed(ctx, &why) && retry {
                        let next = self.decide_only(c, ctx, now_ms());
                        decision = self.settled(c, ctx, next).await;
                        ctx.count_decision(decision);
                        continue;
                    }
                    return self.failed(c, ctx, 502, &why, req).await;
                }
                // The server closed a kept connection: the same server, on a new one.
                Failure::Stale if retry && exchange::idempotent(c) => {
                    decision = Decision::Route { server, outcome };
                }
                Failure::Stale => {
                    ctx.upstream_failed = true;
                    let address = router.servers()[server].config.address;
                    let why = format!("the server closed a kept connection ({address})");
                    return self.failed(c, ctx, 502, &why, req).await;
                }
                Failure::Status if retry => decision = self.decide(c, ctx, now_ms()),
                Failure::Status => return self.failed(c, ctx, 502, "fail_on_status", req).await,
                Failure::Upstream(status, why) => {
                    ctx.upstream_failed = true;
                    let address = router.servers()[server].config.address;
                    let why = format!("{why} ({address})");
                    return self.failed(c, ctx, status, &why, req).await;
                }
                Failure::Client(status) => return (status, false),
                Failure::Body(stop) => return self.body_stopped(c, stop, req).await,
            }
        }
    }

    /// `d`, or, when it would fail a WebSphere session over while a fleet feeds the
    /// partition table, what is decided once the fleet has had its word
    /// (`proxy/fleet_wait.rs`). Boxed only when it waits.
    async fn settled(&self, c: &Conn, ctx: &mut RequestCtx, d: Decision) -> Decision {
        if !proxy::waits_for_fleet(ctx.router.as_deref(), d, ctx.session_key) {
            return d;
        }
        let router = ctx.router.clone().expect("waits_for_fleet saw it");
        let key = ctx.session_key;
        let fleet = proxy::await_fleet(&router, d, key, || self.decide_only(c, ctx, now_ms()));
        Box::pin(fleet).await
    }

    fn decide(&self, c: &Conn, ctx: &mut RequestCtx, now: u64) -> Decision {
        let d = self.decide_only(c, ctx, now);
        ctx.count_decision(d);
        d
    }

    /// The decision, not counted yet.
    fn decide_only(&self, c: &Conn, ctx: &mut RequestCtx, now: u64) -> Decision {
        let Some(router) = &ctx.router else {
            return Decision::Reject(Reject::NoServer);
        };
        let target = c.head.target.of(&c.buf);
        let (d, key) = router.decide_keyed(target, &View(c), &ctx.tried, now, ctx.preferred);
        ctx.session_key = key;
        d
    }

    /// tether refused the request (no server, `sticky_force`): 503.
    async fn refused(
        &self,
        c: &mut Conn,
        ctx: &mut RequestCtx,
        reason: Reject,
        req: &Request,
    ) -> (u16, bool) {
        ctx.rejected = Some(reason);
        if let Some(router) = &ctx.router {
            proxy::log_refusal(router, reason);
        }
        answer::plain(
            &mut c.out,
            503,
            reason.body().as_bytes(),
            !req.keeps(),
            None,
        );
        self.answered(c, 503, req).await
    }

    /// The server failed before an answer: `status` (502, 504), and the connection closes.
    async fn failed(
        &self,
        c: &mut Conn,
        ctx: &RequestCtx,
        status: u16,
        why: &str,
        req: &Request,
    ) -> (u16, bool) {
        proxy::log_failure(why, status, ctx.tried.len(), &self.name);
        answer::plain(
            &mut c.out,
            status,
            proxy::error_body(status).as_bytes(),
            true,
            None,
        );
        let _ = c.write_out(&req.limits, &self.name).await;
        (status, false)
    }

    /// The body stopped while it streamed to the server (abandoned with its connection):
    /// 408 for a slow one, the refusal of a malformed one, and the connection closes.
    async fn body_stopped(&self, c: &mut Conn, stop: Stop, req: &Request) -> (u16, bool) {
        match stop {
            Stop::TooSlow => {
                self.too_slow(c, &req.limits).await;
                (408, false)
            }
            Stop::Refused(refusal) => {
                let status = refusal.status;
                self.refuse(c, refusal).await;
                (status, false)
            }
            Stop::Closed => (499, false),
        }
    }

    /// Writes tether's own answer (in `out`).
    async fn answered(&self, c: &mut Conn, status: u16, req: &Request) -> (u16, bool) {
        match c.write_out(&req.limits, &self.name).await {
            Ok(()) => (status, req.keeps()),
            Err(_) => (status, false),
        }
    }

    pub(super) fn log(&self, c: &Conn, ctx: &mut RequestCtx, status: u16) {
        let server = ctx.server;
        ctx.release();
        // One reading of the clock for the request's duration and the server's record.
        let end = crate::poll_time::now();
        let duration = end.saturating_duration_since(ctx.start);
        if let Some(m) = &ctx.metrics {
            let server = if ctx.rejected.is_some() { None } else { server };
            m.request_done(server, status, duration.as_secs_f64());
        }
        if let (Some(router), Some(i), None) = (&ctx.router, server, ctx.rejected) {
            router.observe(i, status, ctx.upstream_failed, ms_at(end));
        }
        proxy::plugins::log(ctx, status, server);
        if let Some(log) = &self.access_log {
            log.log(record(c, ctx, status, duration, server));
        }
    }
}

/// The request's target in origin-form (`/path?query`): the target, or what an
/// absolute-form one names after its authority (as pingora-proxy's path reads it).
fn origin<'a>(head: &RequestHead, buf: &'a [u8]) -> &'a [u8] {
    let target = head.target.of(buf);
    match crate::http1::target::absolute(target) {
        Some(absolute) => absolute.origin(),
        None => target,
    }
}

/// The access log's record (it allocates its method and target: the log writes them).
fn record(
    c: &Conn,
    ctx: &RequestCtx,
    status: u16,
    duration: std::time::Duration,
    server: Option<usize>,
) -> Record {
    let method = http::Method::from_bytes(c.head.method.of(&c.buf)).unwrap_or_default();
    let uri = http::Uri::try_from(c.head.target.of(&c.buf)).unwrap_or_default();
    let version = match c.head.minor {
        0 => http::Version::HTTP_10,
        _ => http::Version::HTTP_11,
    };
    let tls = c.tls().map(|d| d.version.clone());
    proxy::access_record(
        ctx,
        c.peer,
        (method, uri, version),
        tls,
        (status, duration, server),
    )
}
