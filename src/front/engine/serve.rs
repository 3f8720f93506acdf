//! One HTTP/1 request on tether's engine, in the order of pingora-proxy's phases: the head
//! read and checked, the body buffered, then the proxy core's steps (`steps.rs`) and the
//! log. A connection that waits past a grace for its next request gives its buffers back
//! and waits outside the request's future ([`Engine::idle`]). A request the engine does not take yet is
//! handed to pingora-proxy with the bytes already read, and the connection stays there.

use super::answer;
use super::conn::{to_client, Conn, IdleConn};
use super::exchange::Request;
use super::grace::Place;
use super::idle::{Held, IdleWait};
use super::upload::Upload;
use crate::pipeline::access_log::AccessLog;
use crate::pipeline::{Answer, RequestCtx, Stop};
use crate::state::snapshot::SharedSnapshot;
use crate::wire::http1::framing;
use bytes::BytesMut;
use pingora_core::connectors::{ConnectorOptions, TransportConnector};
use pingora_core::protocols::http::ServerSession;
use pingora_prometheus::prometheus::IntCounter;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// How long a kept-alive connection waits for its next request with its buffers; then it
/// gives them back until the request comes (nginx frees them at once; a grace keeps a
/// busy connection's requests free of allocations). Past its thread's places
/// (`grace.rs`) it gives them back at once, and waits this long in its task before it is
/// parked.
pub const IDLE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Where an idle connection ([`Next::Idle`]) is in its grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grace {
    /// It waited [`IDLE_GRACE`] with its buffers.
    Over,
    /// It gave them back at once (no place was left in its thread's grace, `grace.rs`):
    /// [`IDLE_GRACE`] is still the time to wait in its task before it is parked.
    Left,
}

/// The engine of one listener.
pub struct Engine {
    pub(super) snapshot: SharedSnapshot,
    pub(super) listener: usize,
    pub(super) name: Arc<str>,
    pub(super) access_log: Option<Arc<AccessLog>>,
    pub(super) versions: crate::metrics::VersionCounters,
    pub(super) connector: TransportConnector,
    /// Most idle connections kept per server and thread.
    pool_size: usize,
    /// Most connections per thread that wait for their next request with their buffers
    /// (`server.idle_buffers_per_thread`).
    idle_buffers: usize,
    stopping: AtomicBool,
    shutdown: Notify,
    /// Requests served here, and handed over.
    served: (IntCounter, IntCounter),
    pub(super) tunnels: crate::metrics::Tunnels,
}

/// What comes after a request.
pub enum Next {
    /// The connection carries the next request.
    KeepAlive(Box<Conn>),
    Close,
    /// The connection waits for its next request and gave its buffers back: its next
    /// bytes are awaited with [`Engine::idle`], outside this request's future.
    Idle(Box<IdleConn>, Grace),
    /// Not one for the engine: a session that reads the same request again from the
    /// bytes already read, for pingora-proxy.
    Handover(Box<ServerSession>),
}

impl Engine {
    pub fn new(
        snapshot: SharedSnapshot,
        listener: usize,
        name: &str,
        access_log: Option<Arc<AccessLog>>,
        options: ConnectorOptions,
        idle_buffers: usize,
    ) -> Self {
        let pool_size = options.keepalive_pool_size;
        Engine {
            pool_size,
            idle_buffers,
            snapshot,
            listener,
            name: name.into(),
            access_log,
            versions: crate::metrics::VersionCounters::new(name),
            connector: TransportConnector::new(Some(options)),
            stopping: AtomicBool::new(false),
            shutdown: Notify::new(),
            served: crate::metrics::engine_counters(name),
            tunnels: crate::metrics::Tunnels::new(name),
        }
    }

    /// The server is stopping: connections that wait for their next request close, and
    /// answered ones are not kept. A new connection's first request is still read (its
    /// head deadline bounds the wait) and answered with `Connection: close`: its client
    /// sent it, or is about to, to a process that accepted the connection, and unlike a
    /// request on a kept-alive connection it is not one that a client retries when the
    /// connection closes unanswered.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.shutdown.notify_waiters();
    }

    /// Reads one request from the connection and serves it, or hands it over. `first`: the first
    /// request of a run (a new connection's, or one whose first bytes are read), which a
    /// stop does not cancel while it is awaited.
    pub async fn serve(&self, mut c: Box<Conn>, stopping: bool, first: bool) -> Next {
        let stop = self.shutdown.notified();
        tokio::pin!(stop);
        stop.as_mut().enable();
        loop {
            match c.head.parse(&c.buf[..c.end]) {
                Ok(true) => break,
                Ok(false) => {}
                Err(refusal) => {
                    self.refuse(&mut c, refusal).await;
                    return Next::Close;
                }
            }
            if !first && c.end == 0 && self.stopping.load(Ordering::Acquire) {
                return Next::Close;
            }
            // The head's size is bounded by the listener's stream (`HeadLimited`), which
            // answers 431 itself and ends the reads. A connection that waits for its next
            // request longer than `IDLE_GRACE`, or must wait when its thread's grace has no
            // place left, gives its buffers back and returns (`Next::Idle`): the listener
            // waits for it without this request's future.
            let read = if c.end > 0 {
                c.read_more(usize::MAX).await
            } else if let Some(_place) = Place::take(self.idle_buffers) {
                let read = tokio::select! {
                    biased;
                    r = crate::base::poll_time::timeout(IDLE_GRACE, c.read_more(usize::MAX)) => r,
                    () = stop.as_mut(), if !first => return Next::Close,
                };
                match read {
                    Ok(r) => r,
                    Err(_) => return Next::Idle(c.shed(), Grace::Over),
                }
            } else {
                // No place left in this thread's grace: the read is tried once, and a
                // connection that must wait gives its buffers back now.
                let read = tokio::select! {
                    biased;
                    r = c.read_more(usize::MAX) => Some(r),
                    () = std::future::ready(()) => None,
                };
                match read {
                    Some(r) => r,
                    None => return Next::Idle(c.shed(), Grace::Left),
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
                self.refuse(&mut c, refusal).await;
                return Next::Close;
            }
        };
        let target = c.head.target.of(&c.buf);
        // `Expect: 100-continue` the engine answers itself; another expectation is
        // pingora-proxy's to refuse or pass on.
        let continues =
            framing.expect && framing::expects_continue(c.head.values(&c.buf, "expect"));
        // Origin-form, or an `http(s)` absolute-form with a `Host` (passed on as it came).
        let absolute =
            crate::wire::http1::target::absolute(target).filter(|_| framing.host.is_some());
        // An upgrade is asked for with `Upgrade` nominated by `Connection`, in HTTP/1.1
        // (RFC 9110 §7.8); otherwise `Upgrade` is a hop field like another, left out.
        let upgrade = framing.upgrade
            && c.head.minor == 1
            && crate::wire::http1::connection::nominates(
                c.head.values(&c.buf, "connection"),
                b"upgrade",
            );
        let takes = (target.starts_with(b"/") || absolute.is_some())
            && c.head.method.of(&c.buf) != b"CONNECT"
            && !(upgrade && framing.body != framing::Body::Empty)
            && framing.expect == continues
            && !snapshot.plugins_edit();
        if !takes {
            self.served.1.inc();
            return Next::Handover(Box::new(handover(c)));
        }
        self.served.0.inc();
        if let Some(absolute) = absolute {
            let host = c.head.values(&c.buf, "host").next();
            if let Err(refusal) = crate::wire::http1::target::check(&absolute, host) {
                self.refuse(&mut c, refusal).await;
                return Next::Close;
            }
        }
        if framing.connection_options {
            // The fields it nominates are left out of the upstream head (`wire.rs`).
            let nominated = c.head.values(&c.buf, "connection");
            if let Err(refusal) = crate::wire::http1::connection::check(nominated) {
                self.refuse(&mut c, refusal).await;
                return Next::Close;
            }
        }
        crate::front::head_limit::head_read();
        let mut ctx = RequestCtx::new();
        ctx.limits = limits;
        // The body, or its first part, before a server is chosen, at the listener's
        // `request_body_min_rate`; the rest streams to the server (`upload.rs`).
        let mut upload = Upload::new(framing.body, c.head.len);
        if continues && !upload.is_done() && c.head.minor == 1 {
            // The client waits for this before it sends the body (RFC 9110 §10.1.1),
            // which is read here before any server could ask for it (as nginx and
            // pingora-proxy's path do); the server gets the body without `Expect`.
            let go_on = b"HTTP/1.1 100 Continue\r\n\r\n";
            if to_client(&mut c.stream, go_on, &limits, &self.name)
                .await
                .is_err()
            {
                return Next::Close;
            }
        }
        match upload.read_first(&mut c, &limits, ctx.start).await {
            Ok(()) => {}
            Err(Stop::TooSlow) => {
                self.too_slow(&mut c, &limits).await;
                return Next::Close;
            }
            Err(Stop::Refused(refusal)) => {
                self.refuse(&mut c, refusal).await;
                return Next::Close;
            }
            Err(Stop::Closed) => return Next::Close,
        }
        let mut req = Request {
            upload,
            head_request: c.head.method.of(&c.buf) == b"HEAD",
            client_keep: framing.keep_alive && !stopping && !self.stopping.load(Ordering::Acquire),
            http10: c.head.minor == 0,
            nominates: framing.connection_options,
            upgrade,
            limits,
            pool_size: self.pool_size,
            alt_svc: snapshot.alt_svc[self.listener].clone(),
        };
        let (status, keep) = self.process(&mut c, &mut ctx, &snapshot, &mut req).await;
        self.log(&c, &mut ctx, status);
        if !keep || !req.upload.is_done() {
            return Next::Close;
        }
        c.consume(req.upload.used());
        Next::KeepAlive(c)
    }

    /// The wait, without buffers, for the first bytes of the next request of a connection
    /// that gave them back ([`Next::Idle`]), until `until`.
    pub fn idle<'a>(&'a self, held: &'a mut Held, until: std::time::Instant) -> IdleWait<'a> {
        // Made before the flag is read: a stop after this wakes it, polled or not.
        let stop = self.shutdown.notified();
        IdleWait {
            held,
            stopping: self.stopping.load(Ordering::Acquire),
            stop,
            deadline: tokio::time::sleep_until(until.into()),
        }
    }

    /// A head refused (malformed, or framed ambiguously): its status, and the connection
    /// closes (what came after it cannot be trusted to start a request).
    pub(super) async fn refuse(&self, c: &mut Conn, refusal: crate::wire::http1::head::Refusal) {
        crate::front::head_limit::head_read();
        let refused = Answer::Refusal {
            status: refusal.status,
            why: refusal.why,
        };
        let snapshot = self.snapshot.load();
        answer::write(&mut c.out, &self.paged(refused, &snapshot), true);
        let limits = snapshot.limits[self.listener];
        let _ = c.write_out(&limits, &self.name).await;
    }

    /// The body did not come at the listener's rate: 408, and the connection closes.
    pub(super) async fn too_slow(&self, c: &mut Conn, limits: &crate::config::ListenerLimits) {
        crate::metrics::client_closed(&self.name, "request_body_timeout");
        let snapshot = self.snapshot.load();
        answer::write(&mut c.out, &self.paged(Answer::TooSlow, &snapshot), true);
        let _ = c.write_out(limits, &self.name).await;
    }

    /// `answer` with the listener's page for it, for an answer given before (or without)
    /// a route and cluster.
    fn paged<'s>(
        &self,
        answer: Answer<'s>,
        snapshot: &'s crate::state::snapshot::Snapshot,
    ) -> Answer<'s> {
        let own = snapshot.listener_pages[self.listener].as_ref();
        answer.paged([None, None, own])
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
