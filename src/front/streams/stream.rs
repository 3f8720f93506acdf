//! One request stream (HTTP/2 or HTTP/3) on tether's front end: the request checked, admitted and routed by the
//! pipeline's steps (`crate::pipeline`), its body's first part read, the tries of servers,
//! tether's own answers, and the request's metrics and access-log record.

use super::ajp;
use super::answer;
use super::body::Upload;
use super::exchange::{self, Exchange};
use super::io::{RecvBody, Respond};
use super::tunnel;
use super::{Link, Streams};
use crate::pipeline::access_log::Record;
use crate::pipeline::{self, plugins, Admitted, Answer, Ended, Front, RequestCtx, Stop, Tries};
use crate::routing::Fields;
use crate::state::snapshot::Snapshot;
use crate::wire::http1::framing::{self, Body};
use http::request::Parts;
use http::HeaderName;
use pingora_http::RequestHeader;
use std::sync::Arc;

/// How a stream ended, for the connection's count of streams its client reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    Answered,
    /// The client reset the stream before its answer ended.
    ResetByClient,
}

/// A stream's request as the pipeline reads it.
pub(super) struct View<'a> {
    pub parts: &'a Parts,
    pub link: &'a Link,
}

impl Fields for View<'_> {
    fn values<'a>(
        &'a self,
        name: &'a HeaderName,
    ) -> impl DoubleEndedIterator<Item = &'a [u8]> + 'a {
        self.parts
            .headers
            .get_all(name)
            .iter()
            .map(|v| v.as_bytes())
    }
}

impl Front for View<'_> {
    fn peer(&self) -> Option<std::net::IpAddr> {
        self.link.peer.map(|a| a.ip())
    }

    fn local_port(&self) -> u16 {
        self.link.local.map_or(0, |a| a.port())
    }

    fn host(&self) -> Option<&[u8]> {
        match self.parts.headers.get(http::header::HOST) {
            Some(host) => Some(host.as_bytes()),
            None => self.parts.uri.authority().map(|a| a.as_str().as_bytes()),
        }
    }

    fn target(&self) -> &[u8] {
        self.origin()
    }

    fn origin(&self) -> &[u8] {
        self.parts
            .uri
            .path_and_query()
            .map_or(b"/", |p| p.as_str().as_bytes())
    }
}

impl Streams {
    /// Serves one stream, to its end.
    pub async fn stream<B: RecvBody, R: Respond>(
        &self,
        parts: Parts,
        recv: B,
        mut respond: R,
        link: &Link,
    ) -> Served {
        self.versions.count(R::VERSION);
        let snapshot = self.snapshot.load_full();
        let mut ctx = RequestCtx::new();
        ctx.limits = snapshot.limits[self.listener];
        let status = self
            .process(&mut ctx, &snapshot, &parts, recv, &mut respond, link)
            .await;
        let (server, duration) = ctx.done(status);
        if let Some(log) = &self.access_log {
            log.log(record(
                &parts,
                link,
                &ctx,
                (status, duration, server),
                R::VERSION,
            ));
        }
        match status {
            499 => Served::ResetByClient,
            _ => Served::Answered,
        }
    }

    /// The pipeline's steps and the tries: the status answered (499: the client reset the
    /// stream first).
    async fn process<R: Respond>(
        &self,
        ctx: &mut RequestCtx,
        snapshot: &Arc<Snapshot>,
        parts: &Parts,
        recv: impl RecvBody,
        respond: &mut R,
        link: &Link,
    ) -> u16 {
        let limits = ctx.limits;
        let fields = parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()));
        // HTTP/2 and HTTP/3 frame their bodies themselves; a `Content-Length` must still be one number.
        let declared = match framing::length_only(fields) {
            Ok(Body::Length(n)) => Some(n),
            Ok(_) => None,
            Err(refusal) => {
                let refused = Answer::Refusal {
                    status: 400,
                    why: refusal.why,
                };
                return answer::send(respond, &refused, &limits, &self.name).await;
            }
        };
        let tunnel = match tunnel::asked(parts) {
            Ok(tunnel) => tunnel,
            Err(refused) => return answer::send(respond, &refused, &limits, &self.name).await,
        };
        let view = View { parts, link };
        let (mut cluster, route_chain) = match pipeline::admit(snapshot, self.listener, ctx, &view)
        {
            Admitted::Cluster {
                cluster,
                route_chain,
            } => (cluster, route_chain),
            Admitted::Answer(a) => {
                let a = a.paged(pipeline::pages(snapshot, self.listener, ctx));
                return answer::send(respond, &a, &limits, &self.name).await;
            }
            Admitted::Files(files) => {
                let pages = pipeline::pages(snapshot, self.listener, ctx);
                let request = (parts.method.as_str().as_bytes(), view.origin(), &view);
                let sent = super::files::serve(respond, files, request, pages, &limits, &self.name);
                return sent.await;
            }
        };
        if snapshot.has_plugins() {
            let chosen = Box::pin(self.plugins(
                ctx,
                snapshot,
                request_header(parts, R::VERSION),
                link,
                cluster,
                route_chain,
            ));
            match chosen.await {
                Ok(chosen) => cluster = chosen,
                Err(a) => return answer::send(respond, &a.answer(), &limits, &self.name).await,
            }
        }
        ctx.bind(snapshot, cluster);
        let mut upload = Upload::new(recv, declared, ctx.body_limit);
        if tunnel && ctx.ajp.is_some() {
            let refused = Answer::Refusal {
                status: 501,
                why: "a WebSocket does not go over AJP",
            };
            return answer::send(respond, &refused, &limits, &self.name).await;
        }
        // The body, or its first part, before a server is chosen; the rest streams. A
        // tunnel's bytes are no body: they go after the server's `101`.
        let continues = parts
            .headers
            .get(http::header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        if continues && !upload.is_done() && !tunnel {
            let go_on = http::Response::builder()
                .status(100)
                .body(())
                .expect("a 100");
            let _ = respond.send_informational(go_on);
        }
        if !tunnel {
            if let Err(stop) = upload.read_first(&limits, ctx.start).await {
                let pages = pipeline::pages(snapshot, self.listener, ctx);
                return self.stopped(respond, stop, &limits, pages).await;
            }
        }
        let mut x = Exchange::new(parts, link, &mut upload, respond, tunnel);
        let mut tries = Tries::first(ctx, &View { parts, link }).await;
        let ended = loop {
            if let Err(ended) = tries.begin(ctx) {
                break ended;
            }
            let relayed = match ctx.ajp.clone() {
                Some(settings) => ajp::attempt(self, &mut x, ctx, &settings).await,
                None => exchange::attempt(self, &mut x, ctx).await,
            };
            let failure = match relayed {
                Ok(relayed) => break Ended::Relayed(relayed),
                Err(f) => f,
            };
            let idempotent = pipeline::idempotent(parts.method.as_str().as_bytes());
            let front = View { parts, link };
            if let Err(ended) = tries.failed(ctx, &front, failure, idempotent).await {
                break ended;
            }
        };
        match ended {
            Ended::Relayed(relayed) => relayed.status,
            Ended::Refused(reason) => {
                ctx.rejected = Some(reason);
                if let Some(router) = &ctx.router {
                    pipeline::log_refusal(router, reason);
                }
                let refused = Answer::Refused(reason);
                let refused = refused.paged(pipeline::pages(snapshot, self.listener, ctx));
                answer::send(respond, &refused, &limits, &self.name).await
            }
            Ended::Failed(status, why) => {
                crate::front::proxy::log_failure(&why, status, ctx.tried.len(), &self.name);
                let failed = Answer::ServerFailed(status);
                let failed = failed.paged(pipeline::pages(snapshot, self.listener, ctx));
                answer::send(respond, &failed, &limits, &self.name).await
            }
            Ended::Client(status) => status,
            Ended::Replaced(status) => {
                let answer = Answer::ServerFailed(status);
                let answer = answer.paged(pipeline::pages(snapshot, self.listener, ctx));
                answer::send(respond, &answer, &limits, &self.name).await
            }
            Ended::Body(stop) => {
                let pages = pipeline::pages(snapshot, self.listener, ctx);
                self.stopped(respond, stop, &limits, pages).await
            }
        }
    }

    /// The body stopped: 408 for a slow one, 400 for a malformed one; 499 when the client
    /// is gone.
    async fn stopped(
        &self,
        respond: &mut impl Respond,
        stop: Stop,
        limits: &crate::config::ListenerLimits,
        pages: [Option<&crate::config::ErrorPages>; 3],
    ) -> u16 {
        match stop {
            Stop::TooSlow => {
                crate::metrics::client_closed(&self.name, "request_body_timeout");
                let slow = Answer::TooSlow.paged(pages);
                answer::send(respond, &slow, limits, &self.name).await
            }
            Stop::Refused(refusal) => {
                let refused = Answer::Refusal {
                    status: refusal.status,
                    why: refusal.why,
                };
                answer::send(respond, &refused.paged(pages), limits, &self.name).await
            }
            Stop::Closed => 499,
        }
    }

    /// Runs the routing plugins over the request as Pingora's `RequestHeader` (built for
    /// them): the cluster they choose, or a plugin's own answer.
    async fn plugins(
        &self,
        ctx: &mut RequestCtx,
        snapshot: &Arc<Snapshot>,
        mut req: RequestHeader,
        link: &Link,
        start: usize,
        route_chain: Option<&tether_plugins::Chain>,
    ) -> Result<usize, plugins::PluginAnswer> {
        let facts = (
            plugins::proxy_facts(link.proxy.as_deref()),
            plugins::tls_facts(link.tls.as_deref()),
        );
        let name = &self.name;
        plugins::choose(
            snapshot,
            self.listener,
            name,
            ctx,
            start,
            route_chain,
            &mut req,
            facts,
        )
        .await
    }
}

/// The stream's head as Pingora's `RequestHeader`, as Pingora's HTTP/2 session makes it.
fn request_header(parts: &Parts, version: http::Version) -> RequestHeader {
    let mut head = http::Request::builder()
        .method(parts.method.clone())
        .uri(parts.uri.clone())
        .version(version)
        .body(())
        .expect("parts of a request")
        .into_parts()
        .0;
    head.headers = parts.headers.clone();
    RequestHeader::from(head)
}

/// The access log's record.
fn record(
    parts: &Parts,
    link: &Link,
    ctx: &RequestCtx,
    (status, duration, server): (u16, std::time::Duration, Option<usize>),
    version: http::Version,
) -> Record {
    let what = (parts.method.clone(), parts.uri.clone(), version);
    let tls = link.tls.as_ref().map(|d| d.version.clone());
    crate::front::proxy::access_record(
        ctx,
        link.peer.map(|a| a.ip()),
        what,
        tls,
        (status, duration, server),
    )
}
