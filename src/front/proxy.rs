//! Glue between Pingora's `ProxyHttp` phases and tether's pure routing.
//!
//! `request_filter` makes the decision (so a refusal can be answered with a body);
//! `upstream_peer` turns it into a peer and, on retries, asks the router again with the
//! servers already tried; `fail_to_connect` marks the server down and allows the retry.

mod body;
mod files;
mod hooks;
mod min_rate;
mod pace;
mod record;
mod request;
pub mod request_checks;
mod respond;
mod squeeze;

pub use body::H1_MOST;

/// The proxy core's parts that tether's own HTTP/1 engine (`crate::front::engine`) runs too.
pub use files::head as file_head;
pub use min_rate::{body_time_left, write_timeout};
pub use record::of_request as access_record;
pub use respond::{reply, Reply};

use crate::pipeline::access_log::AccessLog;
use crate::pipeline::{self, plugins, Admitted, Answer, Heard, RequestCtx};
use crate::routing::{ms_at, now_ms, Decision};
use crate::state::snapshot::SharedSnapshot;
use log::warn;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_core::Result;
use pingora_error::{Error, ErrorType};
use pingora_http::{RequestHeader, ResponseHeader};
use pingora_proxy::{FailToProxy, Session};
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

/// Only idempotent requests (or any, with `retry_non_idempotent`) whose body is still
/// fully buffered may be sent again.
pub(crate) fn retry_allowed(session: &Session, ctx: &RequestCtx) -> bool {
    ctx.resendable(session.req_header().method.is_idempotent())
        && !session.as_ref().retry_buffer_truncated()
}

/// What tether does in each of Pingora's phases, as plain methods: `hooks.rs` calls them
/// from `ProxyHttp` (HTTP/2, `http1: proxy`, and what tether's engine hands over).
impl TetherProxy {
    /// The head is read: the listener's deadline for it no longer applies. The listener's
    /// timeouts are set here for this request and the idle wait after it (Pingora would
    /// otherwise wait forever for the next request on a kept-alive connection), and
    /// pipelined requests are served in order instead of being dropped.
    pub async fn early_request(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<()> {
        crate::front::head_limit::head_read();
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
        pipeline::websphere::strip_request(session.req_header_mut());
        let snapshot = self.snapshot.load_full();
        let default = snapshot.listeners[self.listener];
        self.versions.count(session.req_header().version);
        // What tether's engine refuses as it reads a head, this path checks here.
        if request::head_size(session) > ctx.limits.max_request_head {
            ctx.metrics = default.map(|d| snapshot.metrics[d].clone());
            crate::metrics::client_closed(&self.name, "request_head_too_large");
            let why = pipeline::error_body(431);
            respond::answer(session, &Answer::Refusal { status: 431, why }, true).await?;
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
            respond::answer(session, &Answer::Refusal { status: 400, why }, true).await?;
            return Ok(true);
        }
        let (start, route_chain) = {
            let front = request::Req::of(session);
            match pipeline::admit(&snapshot, self.listener, ctx, &front) {
                Admitted::Cluster {
                    cluster,
                    route_chain,
                } => (cluster, route_chain),
                Admitted::Answer(answer) => {
                    let answer = answer.paged(pipeline::pages(&snapshot, self.listener, ctx));
                    let reply = respond::reply(&answer, false)?;
                    respond::send(session, reply).await?;
                    return Ok(true);
                }
                Admitted::Files(files) => {
                    let files = files.clone();
                    let on = (&*snapshot, self.listener, &*ctx);
                    files::serve(session, &files, on).await?;
                    return Ok(true);
                }
            }
        };
        let cluster = if snapshot.has_plugins() {
            let digests = session.digest();
            let facts = (
                plugins::proxy_facts(digests.and_then(|d| d.proxy_digest.as_deref())),
                plugins::tls_facts(digests.and_then(|d| d.ssl_digest.as_deref())),
            );
            let chosen = plugins::choose(
                &snapshot,
                self.listener,
                &self.name,
                ctx,
                start,
                route_chain,
                session.req_header_mut(),
                facts,
            )
            .await;
            match chosen {
                Ok(cluster) => cluster,
                Err(a) => {
                    respond::answer(session, &a.answer(), false).await?;
                    return Ok(true);
                }
            }
        } else {
            start
        };
        ctx.bind(&snapshot, cluster);
        let front = request::Req::of(session);
        let first = pipeline::decide(ctx, &front, ms_at(ctx.start));
        let decision = pipeline::settled(ctx, &front, first).await;
        let decision = match pipeline::take_now(ctx, decision) {
            Ok(decision) => decision,
            Err(full) => pipeline::take_slot(ctx, &front, full).await,
        };
        ctx.count_decision(decision);
        match decision {
            Decision::Reject(reason) => {
                ctx.rejected = Some(reason);
                if let Some(router) = &ctx.router {
                    pipeline::log_refusal(router, reason);
                }
                let snapshot = self.snapshot.load();
                let refused = Answer::Refused(reason);
                let refused = refused.paged(pipeline::pages(&snapshot, self.listener, ctx));
                respond::answer(session, &refused, false).await?;
                Ok(true)
            }
            d => {
                ctx.first = Some(d);
                match body::buffer(session, &ctx.limits, ctx.start).await? {
                    body::Buffered::Ready => Ok(false),
                    body::Buffered::TooSlow => {
                        crate::metrics::client_closed(&self.name, "request_body_timeout");
                        let snapshot = self.snapshot.load();
                        let slow = Answer::TooSlow;
                        let slow = slow.paged(pipeline::pages(&snapshot, self.listener, ctx));
                        respond::answer(session, &slow, true).await?;
                        Ok(true)
                    }
                    body::Buffered::Overflow => {
                        warn!(
                            "listener {}: more than 64 KiB of a request body came with its head; refused (413); a max_request_head of 32 KiB or less prevents it",
                            self.name
                        );
                        let why = pipeline::error_body(413);
                        respond::answer(session, &Answer::Refusal { status: 413, why }, true)
                            .await?;
                        Ok(true)
                    }
                }
            }
        }
    }

    pub async fn peer(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<Box<HttpPeer>> {
        if ctx.ajp.is_some() {
            // Pingora's proxy speaks HTTP to servers only; tether's own front ends speak AJP.
            let router = ctx.router.as_ref().map_or("?", |r| r.name.as_str());
            warn!(
                "cluster {router} speaks AJP, which only tether's own HTTP/1 engine serves \
                 yet: a request it hands to Pingora's proxy (http1: proxy, an upgrade with a \
                 body, CONNECT, OPTIONS *, plugins that change messages) is refused (502)"
            );
            return Err(Error::explain(ErrorType::HTTPStatus(502), "AJP cluster"));
        }
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
                let front = request::Req::of(session);
                let d = pipeline::decide(ctx, &front, now_ms());
                let d = pipeline::settled(ctx, &front, d).await;
                let d = pipeline::take_slot(ctx, &front, d).await;
                ctx.count_decision(d);
                d
            }
        };
        let (server, outcome) = match decision {
            Decision::Route { server, outcome } => (server, outcome),
            Decision::Reject(reason) => {
                ctx.rejected = Some(reason);
                if let Some(router) = &ctx.router {
                    pipeline::log_refusal(router, reason);
                }
                return Err(Error::explain(ErrorType::HTTPStatus(503), reason.body()));
            }
        };
        ctx.begin_try(server, outcome);
        let router = ctx.router.as_ref().expect("set in request_filter");
        let slot = &router.servers()[server];
        let mut peer = pipeline::http_peer(ctx, slot, router.timeouts());
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
        let tls = pipeline::Secure::of(session);
        if ctx.forwarded {
            pipeline::set_forwarded(upstream_request, client.map(|a| a.ip()), tls.is_some());
        }
        if let Some(names) = &ctx.ssl_headers {
            pipeline::set_ssl_headers(upstream_request, names, tls.as_ref());
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
            let tagged = pipeline::tag_request(
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
        let status = upstream_response.status.as_u16();
        let allowed = retry_allowed(session, ctx);
        let may_retry = || allowed;
        match pipeline::heard(ctx, status, &upstream_response.headers, may_retry) {
            // An interim answer: the final one decides the server's health and learning.
            Heard::Interim => return Ok(()),
            Heard::TooManyInterim => {
                return Err(Error::explain(
                    ErrorType::HTTPStatus(502),
                    "too many informational (1xx) responses",
                ))
            }
            Heard::Failed => {
                return Err(Error::explain(
                    ErrorType::HTTPStatus(pipeline::FAILED_STATUS),
                    "fail_on_status",
                ))
            }
            Heard::Retry => {
                // Nothing has gone downstream yet, so the retry is invisible.
                ctx.status_failure = true;
                let mut e = Error::explain(ErrorType::HTTPStatus(status), "fail_on_status");
                e.set_retry(true);
                return Err(e);
            }
            Heard::Final => {}
            // Its body is dropped for tether's page (`fail_to_proxy` answers the status).
            Heard::Replace => {
                return Err(Error::explain(
                    ErrorType::HTTPStatus(status),
                    "replace_server_errors",
                ))
            }
        }
        pipeline::websphere::strip_response(upstream_response);
        if let Some((snapshot, listener, cluster)) = &ctx.plugins {
            let state = &mut ctx.plugin_state;
            snapshot.listener_chains[*listener]
                .upstream_response(upstream_response, state)
                .await;
            snapshot.cluster_chains[*cluster]
                .upstream_response(upstream_response, state)
                .await;
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
            crate::front::head_limit::reset_on_close();
        }
        // Only an interim answer may have gone out; then a final one still can. A `101`
        // is final: the connection is the upgraded protocol's from then on, and a byte of
        // tether's own in it would corrupt that protocol's stream.
        let final_written = session
            .response_written()
            .is_some_and(|r| crate::wire::http1::response::is_final(r.status.as_u16()));
        if code > 0 && !final_written {
            let answer = match (ctx.rejected, code) {
                (Some(reason), _) => Answer::Refused(reason),
                (None, 502 | 504) => Answer::ServerFailed(code),
                (None, 408) => Answer::TooSlow,
                (None, status) => Answer::Refusal {
                    status,
                    why: pipeline::error_body(status),
                },
            };
            let snapshot = self.snapshot.load();
            let answer = answer.paged(pipeline::pages(&snapshot, self.listener, ctx));
            if let Err(err) = respond::answer(session, &answer, true).await {
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
        session: &mut Session,
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
        let req = session.req_header();
        let asked = (
            req.method == http::Method::HEAD,
            req.version == http::Version::HTTP_10,
        );
        squeeze::head(upstream_response, asked, ctx);
        if let Some(alt_svc) = &self.snapshot.load().alt_svc[self.listener] {
            upstream_response.insert_header(http::header::ALT_SVC, alt_svc.clone())?;
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
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        // A refusal by policy (503 with no server, `sticky_force`), a client that went away
        // or was too slow are expected events, counted in the metrics: not errors.
        if let Some(e) = e.filter(|e| {
            ctx.rejected.is_none() && e.esource() != &pingora_error::ErrorSource::Downstream
        }) {
            let why = match (&ctx.router, server) {
                (Some(router), Some(i)) => {
                    crate::pipeline::reason::of(e, router.servers()[i].config.address, None)
                }
                _ => crate::pipeline::reason::of(e, "no server", None),
            };
            log_failure(&why, status, ctx.tried.len(), &self.name);
        }
        let (server, duration) = ctx.done(status);
        if let Some(log) = &self.access_log {
            log.log(record::of(session, ctx, status, duration, server));
        }
    }
}

/// A request failed for want of its server's answer: one ERROR line, in words.
pub fn log_failure(why: &str, status: u16, tries: usize, listener: &str) {
    log::error!("Fail to proxy: {why}, status: {status}, tries: {tries}, listener {listener}");
}
