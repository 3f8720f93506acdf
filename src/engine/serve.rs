//! One HTTP/1 request on tether's engine, in the order of pingora-proxy's phases: the head
//! read and checked, the proxy core's steps over it (client address, per-client rate,
//! routes, the routing decision), tries of servers until one answers or no retry is
//! allowed, and the log. A request the engine does not take yet is handed to
//! pingora-proxy with the bytes already read, and the connection stays there.

use super::answer;
use super::conn::Conn;
use super::exchange::{self, Failure, Request};
use crate::access_log::{AccessLog, Record};
use crate::config::RouteAction;
use crate::http1::framing::{self, Body};
use crate::proxy::{self, RequestCtx};
use crate::routes::Found;
use crate::routing::{ms_at, now_ms, Decision, Fields, Reject};
use crate::snapshot::{SharedSnapshot, Snapshot};
use bytes::BytesMut;
use http::HeaderName;
use log::error;
use pingora_core::connectors::{ConnectorOptions, TransportConnector};
use pingora_core::protocols::http::ServerSession;
use pingora_prometheus::prometheus::IntCounter;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::io::AsyncReadExt;
use tokio::sync::Notify;

/// How long a kept-alive connection waits for its next request with its buffers; then it
/// gives them back until the request comes (nginx frees them at once; a grace keeps a
/// busy connection's requests free of allocations).
const IDLE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Bound on tries of one request (pingora-proxy's; tether's `max_attempts` is lower).
const MAX_TRIES: usize = 16;

/// The engine of one listener.
pub struct Engine {
    snapshot: SharedSnapshot,
    listener: usize,
    name: String,
    access_log: Option<Arc<AccessLog>>,
    versions: crate::metrics::VersionCounters,
    connector: TransportConnector,
    /// Most idle connections kept per server and thread.
    pool_size: usize,
    stopping: AtomicBool,
    shutdown: Notify,
    /// Requests served here, and handed over.
    served: (IntCounter, IntCounter),
}

/// What comes after a request.
pub enum Next {
    /// The connection carries the next request.
    KeepAlive(Box<Conn>),
    Close,
    /// Not one for the engine: a session that reads the same request again from the
    /// bytes already read, for pingora-proxy.
    Handover(Box<ServerSession>),
}

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
    pub fn new(
        snapshot: SharedSnapshot,
        listener: usize,
        name: &str,
        access_log: Option<Arc<AccessLog>>,
        options: ConnectorOptions,
    ) -> Self {
        let pool_size = options.keepalive_pool_size;
        Engine {
            pool_size,
            snapshot,
            listener,
            name: name.to_string(),
            access_log,
            versions: crate::metrics::VersionCounters::new(name),
            connector: TransportConnector::new(Some(options)),
            stopping: AtomicBool::new(false),
            shutdown: Notify::new(),
            served: crate::metrics::engine_counters(name),
        }
    }

    /// The server is stopping: idle connections close, answered ones are not kept.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.shutdown.notify_waiters();
    }

    /// Reads one request from the connection and serves it, or hands it over.
    pub async fn serve(&self, mut c: Box<Conn>, stopping: bool) -> Next {
        let stop = self.shutdown.notified();
        tokio::pin!(stop);
        stop.as_mut().enable();
        loop {
            match c.head.parse(&c.buf[..c.end]) {
                Ok(true) => break,
                Ok(false) => {}
                Err(refusal) => {
                    answer::plain(
                        &mut c.out,
                        refusal.status,
                        refusal.why.as_bytes(),
                        true,
                        None,
                    );
                    let limits = self.snapshot.load().limits[self.listener];
                    let _ = c.write_out(&limits, &self.name).await;
                    return Next::Close;
                }
            }
            if self.stopping.load(Ordering::Acquire) && c.end == 0 {
                return Next::Close;
            }
            // The head's size is bounded by the listener's stream (`HeadLimited`), which
            // answers 431 itself and ends the reads. A connection that waits for its next
            // request longer than `IDLE_GRACE` gives its buffers back meanwhile.
            let read = if c.end > 0 {
                c.read_more(usize::MAX).await
            } else {
                match self.wait(&mut c, stop.as_mut()).await {
                    Some(r) => r,
                    None => return Next::Close,
                }
            };
            match read {
                Ok(0) | Err(_) => return Next::Close,
                Ok(_) => {}
            }
        }
        let snapshot = self.snapshot.load_full();
        let limits = snapshot.limits[self.listener];
        let framing = match framing::frame(c.head.minor, c.head.fields(&c.buf)) {
            Ok(f) => f,
            Err(refusal) => {
                crate::listener::head_read();
                answer::plain(
                    &mut c.out,
                    refusal.status,
                    refusal.why.as_bytes(),
                    true,
                    None,
                );
                let _ = c.write_out(&limits, &self.name).await;
                return Next::Close;
            }
        };
        let body_len = match framing.body {
            Body::Empty => Some(0),
            Body::Length(n) if n as usize <= limits.request_buffer => Some(n as usize),
            _ => None,
        };
        let target = c.head.target.of(&c.buf);
        let takes = body_len.is_some()
            && target.starts_with(b"/")
            && c.head.method.of(&c.buf) != b"CONNECT"
            && !framing.upgrade
            && !framing.expect
            && !framing.connection_options
            && !snapshot.has_plugins()
            && snapshot.redirects[self.listener].is_none();
        let Some(body_len) = body_len.filter(|_| takes) else {
            self.served.1.inc();
            return Next::Handover(Box::new(handover(c)));
        };
        self.served.0.inc();
        crate::listener::head_read();
        let mut ctx = RequestCtx::new();
        ctx.limits = limits;
        // The body, whole before a server is chosen (it is at most `request_buffer`), at
        // the listener's `request_body_min_rate`.
        let need = c.head.len + body_len;
        while c.end < need {
            let waited = crate::listener::client_wait().unwrap_or_else(|| ctx.start.elapsed());
            let received = (c.end - c.head.len) as u64;
            let read = match proxy::body_time_left(&limits, waited, received) {
                Some(wait) => tokio::time::timeout(wait, c.read_more(need)).await,
                None => Ok(Err(std::io::ErrorKind::TimedOut.into())),
            };
            match read {
                Ok(Ok(n)) if n > 0 => {}
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
                    return self.too_slow(c, &limits).await;
                }
                Ok(_) => return Next::Close,
                Err(_) => return self.too_slow(c, &limits).await,
            }
        }
        let req = Request {
            body: framing.body,
            body_len,
            head_request: c.head.method.of(&c.buf) == b"HEAD",
            client_keep: framing.keep_alive && !stopping && !self.stopping.load(Ordering::Acquire),
            http10: c.head.minor == 0,
            limits,
            pool_size: self.pool_size,
        };
        let (status, keep) = self.process(&mut c, &mut ctx, &snapshot, &req).await;
        self.log(&c, &mut ctx, status);
        if !keep {
            return Next::Close;
        }
        c.consume(need);
        Next::KeepAlive(c)
    }

    /// Waits for the first bytes of a connection's next request: in its buffers for
    /// [`IDLE_GRACE`], then without them (a few hundred bytes on the stack of this wait).
    /// `None` when the server stops meanwhile.
    async fn wait(
        &self,
        c: &mut Conn,
        mut stop: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    ) -> Option<std::io::Result<usize>> {
        if !c.is_shed() {
            let read = tokio::select! {
                biased;
                r = tokio::time::timeout(IDLE_GRACE, c.read_more(usize::MAX)) => r,
                () = stop.as_mut() => return None,
            };
            match read {
                Ok(r) => return Some(r),
                Err(_) => c.shed(),
            }
        }
        let mut first = [0u8; super::conn::IDLE_READ];
        let read = tokio::select! {
            biased;
            r = c.stream.read(&mut first) => r,
            () = stop => return None,
        };
        Some(read.inspect(|&n| {
            if n > 0 {
                c.restore(&first[..n]);
            }
        }))
    }

    /// The proxy core's steps and the tries: the status answered, and whether the client's
    /// connection goes on.
    async fn process(
        &self,
        c: &mut Conn,
        ctx: &mut RequestCtx,
        snapshot: &Arc<Snapshot>,
        req: &Request,
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
                    !req.client_keep,
                    Some(("Retry-After", secs)),
                );
                return self.answered(c, 429, req).await;
            }
        }
        ctx.forwarded = snapshot.forwarded[self.listener];
        let routes = &snapshot.routes[self.listener];
        let mut start = default;
        if !routes.table.is_empty() {
            let view = View(c);
            let host = view.first(&http::header::HOST).unwrap_or_default();
            let port = c.local.map_or(0, |a| a.port());
            let (host, port) = proxy::host_and_port(host, port);
            let target = c.head.target.of(&c.buf);
            let path = target.split(|&b| b == b'?').next().unwrap_or(target);
            match routes.table.find(host, port, path) {
                found @ (Found::Route(i) | Found::Excluded(i)) => {
                    let info = &routes.routes[i];
                    info.hits.inc();
                    ctx.route = Some(info.name.clone());
                    ctx.metrics = start.map(|d| snapshot.metrics[d].clone());
                    if matches!(found, Found::Excluded(_)) {
                        let body = proxy::error_body(404).as_bytes();
                        answer::plain(&mut c.out, 404, body, !req.client_keep, None);
                        return self.answered(c, 404, req).await;
                    }
                    match &info.action {
                        RouteAction::Cluster(cluster) => start = Some(*cluster),
                        RouteAction::Respond { status, body } => {
                            answer::plain(
                                &mut c.out,
                                *status,
                                body.as_bytes(),
                                !req.client_keep,
                                None,
                            );
                            return self.answered(c, *status, req).await;
                        }
                        RouteAction::Redirect { to, status } => {
                            let location = Some(("Location", to.as_bytes()));
                            answer::plain(&mut c.out, *status, b"", !req.client_keep, location);
                            return self.answered(c, *status, req).await;
                        }
                    }
                }
                Found::None => {}
            }
        }
        let Some(cluster) = start else {
            let body = proxy::error_body(404).as_bytes();
            answer::plain(&mut c.out, 404, body, !req.client_keep, None);
            return self.answered(c, 404, req).await;
        };
        ctx.router = Some(snapshot.clusters[cluster].clone());
        ctx.metrics = Some(snapshot.metrics[cluster].clone());
        ctx.upstream_tls = snapshot.upstream_tls[cluster].clone();
        ctx.ssl_headers = snapshot.ssl_headers[cluster].clone();
        let mut decision = self.decide(c, ctx, ms_at(ctx.start));
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
            ctx.connect_start = Some(std::time::Instant::now());
            let failure = match exchange::attempt(&self.connector, &self.name, c, ctx, req).await {
                Ok(relayed) => return (relayed.status, relayed.client_keep),
                Err(f) => f,
            };
            let retry = tries < MAX_TRIES;
            match failure {
                Failure::Connect(why) => {
                    if proxy::connect_failed(ctx, &why) && retry {
                        decision = self.decide(c, ctx, now_ms());
                        continue;
                    }
                    return self.failed(c, ctx, 502, &why, req).await;
                }
                // The server closed a kept connection: the same server, on a new one.
                Failure::Stale if retry && exchange_idempotent(c) => {
                    decision = Decision::Route { server, outcome };
                }
                Failure::Stale => {
                    return self
                        .failed(c, ctx, 502, "the server closed a kept connection", req)
                        .await
                }
                Failure::Status if retry => decision = self.decide(c, ctx, now_ms()),
                Failure::Status => return self.failed(c, ctx, 502, "fail_on_status", req).await,
                Failure::Upstream(status, why) => {
                    return self.failed(c, ctx, status, why, req).await
                }
                Failure::Client(status) => return (status, false),
            }
        }
    }

    /// The body did not come at the listener's rate: 408, and the connection closes.
    async fn too_slow(&self, mut c: Box<Conn>, limits: &crate::config::ListenerLimits) -> Next {
        crate::metrics::client_closed(&self.name, "request_body_timeout");
        answer::plain(
            &mut c.out,
            408,
            proxy::error_body(408).as_bytes(),
            true,
            None,
        );
        let _ = c.write_out(limits, &self.name).await;
        Next::Close
    }

    fn decide(&self, c: &Conn, ctx: &RequestCtx, now: u64) -> Decision {
        let Some(router) = &ctx.router else {
            return Decision::Reject(Reject::NoServer);
        };
        let target = c.head.target.of(&c.buf);
        let d = router.decide_with(target, &View(c), &ctx.tried, now, ctx.preferred);
        ctx.count_decision(d);
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
            !req.client_keep,
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
        error!(
            "Fail to proxy: {why}, status: {status}, tries: {}, listener {}",
            ctx.tried.len(),
            self.name
        );
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

    /// Writes tether's own answer (in `out`).
    async fn answered(&self, c: &mut Conn, status: u16, req: &Request) -> (u16, bool) {
        match c.write_out(&req.limits, &self.name).await {
            Ok(()) => (status, req.client_keep),
            Err(_) => (status, false),
        }
    }

    fn log(&self, c: &Conn, ctx: &mut RequestCtx, status: u16) {
        let server = ctx.server;
        ctx.release();
        let duration = ctx.start.elapsed();
        if let Some(m) = &ctx.metrics {
            let server = if ctx.rejected.is_some() { None } else { server };
            m.request_done(server, status, duration.as_secs_f64());
        }
        if let Some(log) = &self.access_log {
            log.log(record(c, ctx, status, duration, server));
        }
    }
}

fn exchange_idempotent(c: &Conn) -> bool {
    matches!(
        c.head.method.of(&c.buf),
        b"GET" | b"HEAD" | b"PUT" | b"DELETE" | b"OPTIONS" | b"TRACE"
    )
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
    Record {
        time: std::time::SystemTime::now(),
        client: ctx.client.or(c.peer),
        method,
        uri,
        status,
        duration,
        router: ctx.router.clone(),
        server,
        outcome: ctx.outcome,
        rejected: ctx.rejected.is_some(),
        attempts: ctx.tried.len(),
        version: if c.head.minor == 0 {
            http::Version::HTTP_10
        } else {
            http::Version::HTTP_11
        },
        tls: c.tls.as_ref().map(|d| d.version.clone()),
        route: ctx.route.clone(),
    }
}

/// A session for pingora-proxy that reads, first, every byte the engine read and did not
/// serve (this request's and any after it).
fn handover(c: Box<Conn>) -> ServerSession {
    let Conn {
        stream, buf, end, ..
    } = *c;
    let mut session = ServerSession::new_http1(stream);
    session.set_pipelined_prefix(BytesMut::from(&buf[..end]));
    session
}
