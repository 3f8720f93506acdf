//! One request on tether's engine through the pipeline's steps (`crate::pipeline`), over
//! the engine's view of it, then the tries of servers until one answers or no retry is
//! allowed, tether's own answers, and the request's metrics and access-log record.

use super::ajp;
use super::answer;
use super::conn::Conn;
use super::exchange::{self, Request};
use super::serve::Engine;
use crate::front::proxy;
use crate::pipeline::access_log::Record;
use crate::pipeline::files::{self, Outcome};
use crate::pipeline::{self, Admitted, Answer, Ended, Front, RequestCtx, Stop, Tries};
use crate::routing::{Fields, Reject};
use crate::state::snapshot::Snapshot;
use crate::wire::http1::head::RequestHead;
use http::HeaderName;
use std::sync::Arc;

/// A request as the pipeline reads it: the engine's view of its buffer and connection
/// (the fields it borrows leave the write buffer free for an answer).
struct View<'a> {
    head: &'a RequestHead,
    buf: &'a [u8],
    peer: Option<std::net::IpAddr>,
    local: Option<std::net::SocketAddr>,
}

impl<'a> View<'a> {
    fn of(c: &'a Conn) -> Self {
        View {
            head: &c.head,
            buf: &c.buf,
            peer: c.peer.map(|a| a.ip()),
            local: c.local,
        }
    }
}

impl Fields for View<'_> {
    fn values<'a>(
        &'a self,
        name: &'a HeaderName,
    ) -> impl DoubleEndedIterator<Item = &'a [u8]> + 'a {
        self.head.values(self.buf, name.as_str())
    }
}

impl Front for View<'_> {
    fn peer(&self) -> Option<std::net::IpAddr> {
        self.peer
    }

    fn local_port(&self) -> u16 {
        self.local.map_or(0, |a| a.port())
    }

    fn host(&self) -> Option<&[u8]> {
        self.head.values(self.buf, "host").next()
    }

    fn target(&self) -> &[u8] {
        self.head.target.of(self.buf)
    }

    fn origin(&self) -> &[u8] {
        crate::wire::http1::target::origin(self.head.target.of(self.buf))
    }
}

impl Engine {
    /// The pipeline's steps and the tries: the status answered, and whether the client's
    /// connection goes on.
    pub(super) async fn process(
        &self,
        c: &mut Conn,
        ctx: &mut RequestCtx,
        snapshot: &Arc<Snapshot>,
        req: &mut Request,
    ) -> (u16, bool) {
        let counters = &self.versions;
        match c.head.minor {
            0 => counters.http10.inc(),
            _ => counters.http11.inc(),
        }
        let view = View {
            head: &c.head,
            buf: &c.buf,
            peer: c.peer.map(|a| a.ip()),
            local: c.local,
        };
        let (mut cluster, route_chain) = match pipeline::admit(snapshot, self.listener, ctx, &view)
        {
            Admitted::Cluster {
                cluster,
                route_chain,
            } => (cluster, route_chain),
            Admitted::Answer(answer) => {
                let answer = answer.paged(pipeline::pages(snapshot, self.listener, ctx));
                let status = answer.status();
                let closes = answer::write(&mut c.out, &answer, !req.keeps());
                return self.answered(c, status, closes, req).await;
            }
            Admitted::Files(files) => {
                let method = c.head.method.of(&c.buf);
                let found = files::look_up(files, method, view.origin(), &view).await;
                let served = match found {
                    Outcome::File(served) => served,
                    Outcome::Moved(to) => {
                        let answer = Answer::Redirect {
                            status: 301,
                            to: &to,
                        };
                        let closes = answer::write(&mut c.out, &answer, !req.keeps());
                        return self.answered(c, 301, closes, req).await;
                    }
                    Outcome::Refused(answer) => {
                        let answer = answer.paged(pipeline::pages(snapshot, self.listener, ctx));
                        let status = answer.status();
                        let closes = answer::write(&mut c.out, &answer, !req.keeps());
                        return self.answered(c, status, closes, req).await;
                    }
                };
                let status = served.status;
                let keeps = req.keeps();
                let sent = super::files::send(c, served, !keeps, &req.limits, &self.name).await;
                return (status, keeps && sent.is_ok());
            }
        };
        if let Err(refusal) = req.upload.bound(ctx.body_limit) {
            self.refuse(c, refusal).await;
            return (refusal.status, false);
        }
        if snapshot.has_plugins() {
            // Boxed: a request without plugins does not carry their future.
            let chosen = Box::pin(self.plugins(c, ctx, snapshot, cluster, route_chain)).await;
            match chosen {
                Ok(chosen) => cluster = chosen,
                Err(a) => {
                    let closes = answer::write(&mut c.out, &a.answer(), !req.keeps());
                    return self.answered(c, a.status, closes, req).await;
                }
            }
        }
        ctx.bind(snapshot, cluster);
        let mut tries = Tries::first(ctx, &View::of(c)).await;
        let ended = loop {
            if let Err(ended) = tries.begin(ctx) {
                break ended;
            }
            let relayed = match ctx.ajp.clone() {
                // Boxed: requests to HTTP servers do not carry the AJP try's future.
                Some(settings) => {
                    let name = &self.name;
                    Box::pin(ajp::attempt(&self.connector, name, c, ctx, req, &settings)).await
                }
                None => {
                    let tunnels = (&*self.name, &self.tunnels);
                    exchange::attempt(&self.connector, tunnels, c, ctx, req).await
                }
            };
            let failure = match relayed {
                Ok(relayed) => break Ended::Relayed(relayed),
                Err(f) => f,
            };
            let idempotent = exchange::idempotent(c);
            if let Err(ended) = tries.failed(ctx, &View::of(c), failure, idempotent).await {
                break ended;
            }
        };
        match ended {
            Ended::Relayed(relayed) => (relayed.status, relayed.client_keep),
            Ended::Refused(reason) => self.refused(c, ctx, reason, req, snapshot).await,
            Ended::Failed(status, why) => {
                let answer = Answer::ServerFailed(status);
                let answer = answer.paged(pipeline::pages(snapshot, self.listener, ctx));
                self.failed(c, ctx, &answer, &why, req).await
            }
            Ended::Client(status) => (status, false),
            Ended::Replaced(status) => {
                let answer = Answer::ServerFailed(status);
                let answer = answer.paged(pipeline::pages(snapshot, self.listener, ctx));
                let closes = answer::write(&mut c.out, &answer, !req.keeps());
                self.answered(c, status, closes, req).await
            }
            Ended::Body(stop) => self.body_stopped(c, stop, req).await,
        }
    }

    /// tether refused the request (no server, `sticky_force`): 503.
    async fn refused(
        &self,
        c: &mut Conn,
        ctx: &mut RequestCtx,
        reason: Reject,
        req: &Request,
        snapshot: &Snapshot,
    ) -> (u16, bool) {
        ctx.rejected = Some(reason);
        if let Some(router) = &ctx.router {
            pipeline::log_refusal(router, reason);
        }
        let answer = Answer::Refused(reason).paged(pipeline::pages(snapshot, self.listener, ctx));
        let closes = answer::write(&mut c.out, &answer, !req.keeps());
        self.answered(c, 503, closes, req).await
    }

    /// The server failed before an answer: `status` (502, 504), and the connection closes.
    async fn failed(
        &self,
        c: &mut Conn,
        ctx: &RequestCtx,
        answer: &Answer<'_>,
        why: &str,
        req: &Request,
    ) -> (u16, bool) {
        let status = answer.status();
        proxy::log_failure(why, status, ctx.tried.len(), &self.name);
        answer::write(&mut c.out, answer, true);
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

    /// Writes tether's own answer (in `out`); `closes`: the connection ends after it.
    async fn answered(
        &self,
        c: &mut Conn,
        status: u16,
        closes: bool,
        req: &Request,
    ) -> (u16, bool) {
        match c.write_out(&req.limits, &self.name).await {
            Ok(()) => (status, req.keeps() && !closes),
            Err(_) => (status, false),
        }
    }

    pub(super) fn log(&self, c: &Conn, ctx: &mut RequestCtx, status: u16) {
        let (server, duration) = ctx.done(status);
        if let Some(log) = &self.access_log {
            log.log(record(c, ctx, status, duration, server));
        }
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
        c.peer.map(|a| a.ip()),
        (method, uri, version),
        tls,
        (status, duration, server),
    )
}
