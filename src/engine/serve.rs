//! One HTTP/1 request on tether's engine, in the order of pingora-proxy's phases: the head
//! read and checked, the body buffered, then the proxy core's steps (`steps.rs`) and the
//! log; and the wait for the next request (without buffers past a grace, [`Engine::idle`],
//! outside the request's future). A request the engine does not take yet is
//! handed to pingora-proxy with the bytes already read, and the connection stays there.

use super::answer;
use super::conn::Conn;
use super::exchange::Request;
use crate::access_log::AccessLog;
use crate::http1::framing::{self, Body};
use crate::proxy::{self, RequestCtx};
use crate::snapshot::SharedSnapshot;
use bytes::BytesMut;
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

/// The engine of one listener.
pub struct Engine {
    pub(super) snapshot: SharedSnapshot,
    pub(super) listener: usize,
    pub(super) name: String,
    pub(super) access_log: Option<Arc<AccessLog>>,
    pub(super) versions: crate::metrics::VersionCounters,
    pub(super) connector: TransportConnector,
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
    /// The connection waited [`IDLE_GRACE`] for its next request and gave its buffers back:
    /// its next bytes are awaited with [`Engine::idle`], outside this request's future.
    Idle(Box<Conn>),
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
                Err(refusal) => return self.refuse(c, refusal).await,
            }
            if self.stopping.load(Ordering::Acquire) && c.end == 0 {
                return Next::Close;
            }
            // The head's size is bounded by the listener's stream (`HeadLimited`), which
            // answers 431 itself and ends the reads. A connection that waits for its next
            // request longer than `IDLE_GRACE` gives its buffers back and returns
            // (`Next::Idle`): the listener waits for it without this request's future.
            let read = if c.end > 0 {
                c.read_more(usize::MAX).await
            } else if c.is_shed() {
                return Next::Idle(c);
            } else {
                let read = tokio::select! {
                    biased;
                    r = tokio::time::timeout(IDLE_GRACE, c.read_more(usize::MAX)) => r,
                    () = stop.as_mut() => return Next::Close,
                };
                match read {
                    Ok(r) => r,
                    Err(_) => {
                        c.shed();
                        return Next::Idle(c);
                    }
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
            Err(refusal) => return self.refuse(c, refusal).await,
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
            && !snapshot.has_plugins();
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

    /// Waits, without buffers, for the first bytes of the next request of a connection
    /// that gave them back ([`Next::Idle`]): a few hundred bytes on the stack of this wait.
    /// True when they came (the buffers are taken again, with them); false at the client's
    /// end, on a failed read, or when the server stops meanwhile.
    pub async fn idle(&self, c: &mut Conn) -> bool {
        let stop = self.shutdown.notified();
        tokio::pin!(stop);
        stop.as_mut().enable();
        if self.stopping.load(Ordering::Acquire) {
            return false;
        }
        let mut first = [0u8; super::conn::IDLE_READ];
        let read = tokio::select! {
            biased;
            r = c.stream.read(&mut first) => r,
            () = stop => return false,
        };
        match read {
            Ok(n) if n > 0 => {
                c.restore(&first[..n]);
                true
            }
            _ => false,
        }
    }

    /// A head refused (malformed, or framed ambiguously): its status, and the connection
    /// closes (what came after it cannot be trusted to start a request).
    async fn refuse(&self, mut c: Box<Conn>, refusal: crate::http1::head::Refusal) -> Next {
        crate::listener::head_read();
        let why = refusal.why.as_bytes();
        answer::plain(&mut c.out, refusal.status, why, true, None);
        let limits = self.snapshot.load().limits[self.listener];
        let _ = c.write_out(&limits, &self.name).await;
        Next::Close
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
