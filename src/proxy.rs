//! Glue between Pingora's `ProxyHttp` phases and tether's pure routing.
//!
//! `request_filter` makes the decision (so a refusal can be answered with a body);
//! `upstream_peer` turns it into a peer and, on retries, asks the router again with the
//! servers already tried; `fail_to_connect` marks the server down and allows the retry.

mod body;
mod client;
mod ctx;
mod fleet_wait;
mod forwarded;
mod hooks;
mod lens;
mod min_rate;
mod pace;
mod peer;
pub mod plugins;
mod record;
mod request;
pub mod request_checks;
mod respond;
mod route;
mod secure;
mod upstream_fields;
mod websphere;

pub use body::H1_MOST;
pub use ctx::RequestCtx;

/// The proxy core's parts that tether's own HTTP/1 engine (`crate::engine`) runs too.
pub use client::client_of;
pub use fleet_wait::{settle as await_fleet, waits as waits_for_fleet};
pub use forwarded::{set_forwarded, write_on_stack};
pub use min_rate::{body_time_left, write_timeout};
pub use peer::{connect_failed, http_peer, status_failed, why_failed};
pub use record::of_request as access_record;
pub use request::{host_and_port, log_refusal};
pub use respond::{error_body, https_host, NO_HOST};
pub use secure::{set_ssl_headers, Secure};
pub use upstream_fields::UpstreamFields;
pub use websphere::{learn as learn_wspt, tag_request};

use crate::access_log::AccessLog;
use crate::routing::{ms_at, now_ms, Decision, Reject};
use crate::snapshot::SharedSnapshot;
use log::{info, warn};
use pingora_core::upstreams::peer::HttpPeer;
use pingora_core::Result;
use pingora_error::{Error, ErrorType};
use pingora_http::{RequestHeader, ResponseHeader};
use pingora_proxy::{FailToProxy, Session};
use respond::Conn;
use std::sync::Arc;

/// The proxy service of one listener.
pub struct TetherProxy {
    snapshot: SharedSnapshot,
    listener: usize,
    /// The listener's name, for the metrics of requests cut short.
    name: Arc<str>,
    access_log: Option<Arc<AccessLog>>,
    /// Requests by HTTP version, resolved once.
    versions: crate::metrics::VersionCounters,
}

impl TetherProxy {
    pub fn new(
        snapshot: SharedSnapshot,
        listener: usize,
        name: &str,
        access_log: Option<Arc<AccessLog>>,
    ) -> Self {
        TetherProxy {
            snapshot,
            listener,
            name: name.into(),
            access_log,
            versions: crate::metrics::VersionCounters::new(name),
        }
    }
}

/// Most informational (1xx) responses relayed for one request; a server sending more is
/// treated as broken (502), so it cannot keep a client busy with an endless stream.
const MAX_INFORMATIONAL: u8 = 16;

/// Only idempotent requests whose body is still fully buffered may be sent again.
pub(crate) fn retry_allowed(session: &Session) -> bool {
    session.req_header().method.is_idempotent() && !session.as_ref().retry_buffer_truncated()
}

fn decide(session: &Session, ctx: &mut RequestCtx) -> Decision {
    let Some(router) = &ctx.router else {
        return Decision::Reject(Reject::NoServer);
    };
    let req = session.req_header();
    // The first decision uses the arrival time the context already read.
    let now = if ctx.tried.is_empty() {
        ms_at(ctx.start)
    } else {
        now_ms()
    };
    let (d, key) =
        router.decide_keyed(req.raw_path(), &req.headers, &ctx.tried, now, ctx.preferred);
    ctx.session_key = key;
    d
}

/// What tether does in each of Pingora's phases, as plain methods: `hooks.rs` calls them
/// from `ProxyHttp` (HTTP/2, `http1: proxy`, and what tether's engine hands over).
impl TetherProxy {
    /// The head is read: the listener's deadline for it no longer applies. The listener's
    /// timeouts are set here for this request and the idle wait after it (Pingora would
    /// otherwise wait forever for the next request on a kept-alive connection), and
    /// pipelined requests are served in order instead of being dropped.
    pub async fn early_request(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<()> {
        crate::head_limit::head_read();
        let limits = self.snapshot.load().limits[self.listener];
        ctx.limits = limits;
        // Only where the request left keep-alive on: Pingora turns it off for HTTP/1.0
        // without `Connection: keep-alive` and for a request framed ambiguously.
        if session.as_downstream().get_keepalive().is_some() {
            session.set_keepalive(Some(limits.keepalive_timeout.as_secs().max(1)));
        }
        session.set_pipelining_enabled(true);
        session.set_read_timeout(Some(limits.request_body_timeout));
        session.set_write_timeout(Some(limits.send_timeout));
        Ok(())
    }

    pub async fn request(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        // WebSphere's private headers are never taken from a client (DESIGN section 3).
        websphere::strip_request(session.req_header_mut());
        let snapshot = self.snapshot.load_full();
        let default = snapshot.listeners[self.listener];
        self.versions.count(session.req_header().version);
        let peer = session
            .client_addr()
            .and_then(|a| a.as_inet())
            .map(|a| a.ip());
        ctx.client = client::client_of(
            peer,
            &session.req_header().headers,
            &snapshot.trusted_proxies[self.listener],
        );
        if let (Some(limiter), Some(client)) = (&snapshot.client_limits[self.listener], ctx.client)
        {
            if let Err(retry_after) = limiter.admit_request(client, ms_at(ctx.start)) {
                ctx.metrics = default.map(|d| snapshot.metrics[d].clone());
                respond::too_many(session, retry_after).await?;
                return Ok(true);
            }
        }
        if let Some(redirect) = snapshot.redirects[self.listener] {
            ctx.metrics = default.map(|d| snapshot.metrics[d].clone());
            respond::to_https(session, redirect).await?;
            return Ok(true);
        }
        if request::head_size(session) > ctx.limits.max_request_head {
            ctx.metrics = default.map(|d| snapshot.metrics[d].clone());
            crate::metrics::client_closed(&self.name, "request_head_too_large");
            respond::plain(session, 431, respond::error_body(431), Conn::Close).await?;
            return Ok(true);
        }
        // The raw head only when its framing needs a second look (rare).
        let raw = session
            .req_header()
            .headers
            .contains_key(http::header::TRANSFER_ENCODING)
            .then(|| request::raw_head(session))
            .flatten();
        if let Err(why) = request_checks::check(session.req_header_mut(), raw.as_deref()) {
            ctx.metrics = default.map(|d| snapshot.metrics[d].clone());
            respond::plain(session, 400, why, Conn::Close).await?;
            return Ok(true);
        }
        ctx.forwarded = snapshot.forwarded[self.listener];
        // Host and path routes choose the cluster (or answer); then the plugins may.
        let listener_routes = &snapshot.routes[self.listener];
        let (start, route) = match route::apply(session, ctx, listener_routes, default).await? {
            route::Step::Cluster { start, route } => (start, route),
            route::Step::Answered => return Ok(true),
        };
        let Some(start) = start else {
            // No route and no default cluster.
            respond::plain(session, 404, respond::error_body(404), Conn::KeepAlive).await?;
            return Ok(true);
        };
        let route_chain = route.map(|i| &*listener_routes.routes[i].chain);
        let cluster = if snapshot.has_plugins() {
            match plugins::choose(
                session,
                ctx,
                &snapshot,
                self.listener,
                &self.name,
                start,
                route_chain,
            )
            .await?
            {
                Some(cluster) => cluster,
                None => return Ok(true),
            }
        } else {
            start
        };
        ctx.router = Some(snapshot.clusters[cluster].clone());
        ctx.metrics = Some(snapshot.metrics[cluster].clone());
        ctx.upstream_tls = snapshot.upstream_tls[cluster].clone();
        ctx.ssl_headers = snapshot.ssl_headers[cluster].clone();
        let mut decision = decide(session, ctx);
        if fleet_wait::waits(ctx.router.as_deref(), decision, ctx.session_key) {
            let router = ctx.router.clone().expect("waits() saw it");
            let key = ctx.session_key;
            decision = fleet_wait::settle(&router, decision, key, || decide(session, ctx)).await;
        }
        ctx.count_decision(decision);
        match decision {
            Decision::Reject(reason) => {
                ctx.rejected = Some(reason);
                if let Some(router) = &ctx.router {
                    request::log_refusal(router, reason);
                }
                respond::plain(session, 503, reason.body(), Conn::KeepAlive).await?;
                Ok(true)
            }
            d => {
                ctx.first = Some(d);
                match body::buffer(session, &ctx.limits, ctx.start).await? {
                    body::Buffered::Ready => Ok(false),
                    body::Buffered::TooSlow => {
                        crate::metrics::client_closed(&self.name, "request_body_timeout");
                        respond::plain(session, 408, respond::error_body(408), Conn::Close).await?;
                        Ok(true)
                    }
                    body::Buffered::Overflow => {
                        warn!(
                            "listener {}: more than 64 KiB of a request body came with its head; refused (413); a max_request_head of 32 KiB or less prevents it",
                            self.name
                        );
                        respond::plain(session, 413, respond::error_body(413), Conn::Close).await?;
                        Ok(true)
                    }
                }
            }
        }
    }

    pub async fn peer(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<Box<HttpPeer>> {
        let decision = match (ctx.first.take(), ctx.retry_same, ctx.server) {
            (Some(first), ..) => first,
            (None, true, Some(server)) => {
                ctx.retry_same = false;
                Decision::Route {
                    server,
                    outcome: ctx.outcome.unwrap_or(crate::routing::Outcome::NewSession),
                }
            }
            _ => {
                let mut d = decide(session, ctx);
                if fleet_wait::waits(ctx.router.as_deref(), d, ctx.session_key) {
                    let router = ctx.router.clone().expect("waits() saw it");
                    let key = ctx.session_key;
                    d = fleet_wait::settle(&router, d, key, || decide(session, ctx)).await;
                }
                ctx.count_decision(d);
                d
            }
        };
        if !ctx.tried.is_empty() {
            if let Some(m) = &ctx.metrics {
                m.retried();
            }
        }
        let (server, outcome) = match decision {
            Decision::Route { server, outcome } => (server, outcome),
            Decision::Reject(reason) => {
                ctx.rejected = Some(reason);
                if let Some(router) = &ctx.router {
                    request::log_refusal(router, reason);
                }
                return Err(Error::explain(ErrorType::HTTPStatus(503), reason.body()));
            }
        };
        ctx.release();
        let router = ctx.router.as_ref().expect("set in request_filter");
        let slot = &router.servers()[server];
        slot.live.start();
        ctx.tried.push(server);
        ctx.server = Some(server);
        ctx.outcome = Some(outcome);
        ctx.connect_start = Some(std::time::Instant::now());
        let mut peer = http_peer(ctx, slot, router.timeouts());
        if session.is_upgrade_req() {
            // Pingora bounds each read of an upgraded connection's server by the peer's read
            // timeout: an idle WebSocket may rest as long as the listener's tunnel allows.
            let read = peer.options.read_timeout.unwrap_or_default();
            peer.options.read_timeout = Some(read.max(ctx.limits.tunnel_idle_timeout));
        }
        Ok(Box::new(peer))
    }

    pub async fn upstream_request(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let client = session.client_addr().and_then(|a| a.as_inet()).copied();
        let tls = secure::Secure::of(session);
        if ctx.forwarded {
            forwarded::set_forwarded(upstream_request, client.map(|a| a.ip()), tls.is_some());
        }
        if let Some(names) = &ctx.ssl_headers {
            secure::set_ssl_headers(upstream_request, names, tls.as_ref());
        }
        if let Some((snapshot, listener, cluster)) = &ctx.plugins {
            let state = &mut ctx.plugin_state;
            snapshot.listener_chains[*listener]
                .upstream_request(upstream_request, state)
                .await;
            snapshot.cluster_chains[*cluster]
                .upstream_request(upstream_request, state)
                .await;
        }
        if !upstream_request.headers.contains_key(http::header::HOST) {
            // HTTP/1.0 may leave Host out, HTTP/1.1 (which tether speaks upstream) may not:
            // the server's address, as nginx's `$proxy_host` default. Rare: one allocation.
            if let (Some(router), Some(i)) = (&ctx.router, ctx.server) {
                let server = &router.servers()[i].config;
                let host = match &server.host {
                    Some(name) => format!("{name}:{}", server.address.port()),
                    None => server.address.to_string(),
                };
                upstream_request.insert_header(http::header::HOST, host)?;
            }
        }
        if let Some(router) = ctx.router.as_ref().filter(|r| r.is_websphere()) {
            let local = session.server_addr().and_then(|a| a.as_inet()).copied();
            let http2 = session.as_downstream().is_http2();
            let tagged = websphere::tag_request(
                router,
                upstream_request,
                ctx.outcome,
                ctx.client.or(client.map(|a| a.ip())),
                local,
                tls.as_ref(),
                http2,
            );
            if let (true, Some(m)) = (tagged, &ctx.metrics) {
                m.wsfo_tagged();
            }
        }
        Ok(())
    }

    pub async fn upstream_response(
        &self,
        session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        if !crate::http1::response::is_final(upstream_response.status.as_u16()) {
            ctx.informational = ctx.informational.saturating_add(1);
            if ctx.informational > MAX_INFORMATIONAL {
                return Err(Error::explain(
                    ErrorType::HTTPStatus(502),
                    "too many informational (1xx) responses",
                ));
            }
            // An interim answer: the final one decides the server's health and learning.
            return Ok(());
        }
        if let (Some(router), Some(i)) = (&ctx.router, ctx.server) {
            let slot = &router.servers()[i];
            let status = upstream_response.status.as_u16();
            if router.fails_on(status)
                && ctx.tried.len() < router.max_attempts as usize
                && retry_allowed(session)
            {
                // mod_jk fail_on_status: this server is in error; the next one gets the
                // request. Nothing has gone downstream yet, so the retry is invisible.
                status_failed(router, slot, status);
                ctx.status_failure = true;
                let mut e = Error::explain(ErrorType::HTTPStatus(status), "fail_on_status");
                e.set_retry(true);
                return Err(e);
            }
            websphere::learn_and_strip(router, &slot.config.name, upstream_response);
            let set_cookies = upstream_response.headers.get_all(http::header::SET_COOKIE);
            router.track(
                ctx.session_key,
                set_cookies.iter().map(|v| v.as_bytes()),
                i,
                crate::routing::ms_at(ctx.start),
            );
            if let Some((snapshot, listener, cluster)) = &ctx.plugins {
                let state = &mut ctx.plugin_state;
                snapshot.listener_chains[*listener]
                    .upstream_response(upstream_response, state)
                    .await;
                snapshot.cluster_chains[*cluster]
                    .upstream_response(upstream_response, state)
                    .await;
            }
            if slot.live.mark_up() {
                info!(
                    "cluster {} server {} ({}) is answering again: marked up",
                    router.name, slot.config.name, slot.config.address
                );
            }
        }
        Ok(())
    }

    pub async fn answer_failure(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
        let code = respond::error_status(e);
        // The server failed to answer (a reset, a timeout): tether answers for it.
        ctx.upstream_failed = e.esource() == &pingora_error::ErrorSource::Upstream;
        if e.esource() == &pingora_error::ErrorSource::Downstream
            && matches!(e.etype(), ErrorType::WriteTimedout)
        {
            // A client too slow to read: close with a reset, or the kernel keeps sending it
            // the megabytes it queued (at its pace) before the close is seen.
            crate::metrics::client_closed(&self.name, "send_timeout");
            crate::head_limit::reset_on_close();
        }
        // Only an interim answer may have gone out; then a final one still can. A `101`
        // is final: the connection is the upgraded protocol's from then on, and a byte of
        // tether's own in it would corrupt that protocol's stream.
        let final_written = session
            .response_written()
            .is_some_and(|r| crate::http1::response::is_final(r.status.as_u16()));
        if code > 0 && !final_written {
            let body = match ctx.rejected {
                Some(reason) => reason.body(),
                None => respond::error_body(code),
            };
            if let Err(err) = respond::plain(session, code, body, Conn::Close).await {
                warn!("failed to send error response: {err}");
            }
        }
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    pub async fn response(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        if let Some((snapshot, listener, cluster)) = &ctx.plugins {
            let state = &mut ctx.plugin_state;
            snapshot.listener_chains[*listener]
                .response(upstream_response, state)
                .await;
            snapshot.cluster_chains[*cluster]
                .response(upstream_response, state)
                .await;
        }
        Ok(())
    }

    /// A connection to the server: a new one's connect time is measured.
    pub fn connected(&self, reused: bool, ctx: &mut RequestCtx) {
        if let (false, Some(start), Some(m)) = (reused, ctx.connect_start, &ctx.metrics) {
            m.connected(start.elapsed().as_secs_f64());
        }
    }

    pub async fn log(&self, session: &mut Session, e: Option<&Error>, ctx: &mut RequestCtx) {
        let server = ctx.server;
        ctx.release();
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        // A refusal by policy (503 with no server, `sticky_force`), a client that went away
        // or was too slow are expected events, counted in the metrics: not errors.
        if let Some(e) = e.filter(|e| {
            ctx.rejected.is_none() && e.esource() != &pingora_error::ErrorSource::Downstream
        }) {
            let why = match (&ctx.router, server) {
                (Some(router), Some(i)) => {
                    crate::reason::of(e, router.servers()[i].config.address, None)
                }
                _ => crate::reason::of(e, "no server", None),
            };
            log_failure(&why, status, ctx.tried.len(), &self.name);
        }
        let duration = ctx.start.elapsed();
        if let Some(m) = &ctx.metrics {
            // A refused request went to no server, whatever it tried.
            let server = if ctx.rejected.is_some() { None } else { server };
            m.request_done(server, status, duration.as_secs_f64());
        }
        if let (Some(router), Some(i), None) = (&ctx.router, server, ctx.rejected) {
            router.observe(i, status, ctx.upstream_failed, crate::routing::now_ms());
        }
        plugins::log(ctx, status, server);
        if let Some(log) = &self.access_log {
            log.log(record::of(session, ctx, status, duration, server));
        }
    }
}

/// A request failed for want of its server's answer: one ERROR line, in words.
pub fn log_failure(why: &str, status: u16, tries: usize, listener: &str) {
    log::error!("Fail to proxy: {why}, status: {status}, tries: {tries}, listener {listener}");
}
