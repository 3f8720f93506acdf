//! One proxy listener's connections, around Pingora's HTTP proxy: the cap on open
//! connections and the deadline for a whole request head (slowloris), which Pingora does
//! not have (it bounds each read, not the head, and not at all on a reused connection).
//!
//! The HTTP/1 connection loop is Pingora's own (`HttpServerApp`'s `process_new`), with three
//! additions: a connection over `max_connections` is closed at once; the connection's reads
//! are bounded by `max_request_head` while a head is read ([`crate::head_limit`]); and each
//! request is raced against its head deadline. The proxy marks the head as read
//! (`head_read`) in its first phase; a deadline that passes before that drops the request,
//! which closes the connection. Nothing was sent upstream then, so nothing is cut short.
//!
//! With `http1: engine` (the default), HTTP/1 requests go through tether's own engine
//! ([`crate::engine`]) instead, until one it does not take is handed over; the connection
//! then stays with Pingora's proxy.

mod accept;
pub mod proxy_protocol;

use crate::head_limit::{HeadBudget, HeadLimited, HEAD};

use crate::client_limits;
use crate::engine::{Engine, Next};
use crate::metrics;
use crate::proxy::TetherProxy;
use crate::snapshot::SharedSnapshot;
use async_trait::async_trait;
use log::warn;
use pingora_core::apps::{HttpServerApp, ServerApp};
use pingora_core::protocols::http::ServerSession;
use pingora_core::protocols::Stream;
use pingora_core::server::ShutdownWatch;
use pingora_proxy::HttpProxy;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Listener {
    proxy: Arc<HttpProxy<TetherProxy>>,
    snapshot: SharedSnapshot,
    index: usize,
    name: String,
    open: AtomicUsize,
    /// The "max_connections reached" line, at most once every 10 s.
    full_log: crate::logging::Every,
    /// Plain HTTP/2 (prior knowledge) is allowed (fixed at start).
    h2c: bool,
    /// tether's HTTP/1 engine, when the listener has `http1: engine` (fixed at start).
    engine: Option<Engine>,
}

impl Listener {
    /// The listener `index` of the config; with `h2c`, plain connections that start with
    /// the HTTP/2 preface are HTTP/2.
    pub fn new(
        mut proxy: HttpProxy<TetherProxy>,
        snapshot: SharedSnapshot,
        index: usize,
        name: String,
        h2c: bool,
        engine: Option<Engine>,
    ) -> Self {
        if h2c {
            // Pingora's HTTP/2 path checks the preface again (it is only peeked at).
            let mut options = pingora_core::apps::HttpServerOptions::default();
            options.h2c = true;
            proxy.server_options = Some(options);
        }
        Listener {
            proxy: Arc::new(proxy),
            snapshot,
            index,
            name,
            open: AtomicUsize::new(0),
            full_log: crate::logging::Every::new(10_000),
            h2c,
            engine,
        }
    }

    /// Serves one request with `serve`, raced against its head deadline `until`; `None` when
    /// the deadline passed before the head was read (the connection is then closed by
    /// dropping it). `serve` is pinned by the caller: a request's future is large (Pingora's
    /// proxy future is tens of KiB) and must not be moved on every request.
    async fn within_deadline<F: Future>(
        &self,
        mut serve: Pin<&mut F>,
        until: Instant,
        budget: &HeadBudget,
    ) -> Option<F::Output> {
        let served = tokio::select! {
            r = serve.as_mut() => Some(r),
            () = tokio::time::sleep_until(until.into()) => {
                if budget.is_lifted() {
                    Some(serve.await)
                } else {
                    None
                }
            }
        };
        if budget.take_exceeded() {
            metrics::client_closed(&self.name, "request_head_too_large");
        }
        if served.is_none() {
            metrics::client_closed(&self.name, "request_head_timeout");
        }
        served
    }

    /// The PROXY protocol header of a new connection: the stream with its peer address
    /// set to the client's, or `None` (closed, counted) when it is refused.
    async fn proxy_protocol(
        &self,
        stream: Stream,
        from: &[ipnet::IpNet],
        deadline: Duration,
    ) -> Option<Stream> {
        let mut l4 = stream
            .into_any()
            .downcast::<pingora_core::protocols::l4::stream::Stream>()
            .ok()?;
        match proxy_protocol::read(&mut l4, from, deadline).await {
            Ok(()) => Some(l4),
            // Counted before the stream is dropped: whoever sees the close sees the count.
            Err(reason) => {
                metrics::client_closed(&self.name, reason);
                None
            }
        }
    }

    /// Counts a new connection against its client's `client_limits.connections` (the
    /// client the PROXY protocol named, when it is on): `None` when the client is over it
    /// (the connection is closed at once, as HAProxy's `tcp-request connection reject`).
    fn count_client(&self, stream: &Stream) -> Option<Option<client_limits::Open>> {
        let snapshot = self.snapshot.load();
        let Some(limiter) = &snapshot.client_limits[self.index] else {
            return Some(None);
        };
        let peer = stream
            .get_socket_digest()
            .and_then(|d| d.peer_addr().and_then(|a| a.as_inet()).map(|a| a.ip()));
        let Some(peer) = peer else {
            return Some(None);
        };
        match limiter.open_connection(peer, &snapshot.trusted_proxies[self.index]) {
            client_limits::Connection::Free => Some(None),
            client_limits::Connection::Counted(open) => Some(Some(open)),
            client_limits::Connection::Refused => None,
        }
    }

    /// The next head's deadline (it may wait for the keep-alive timeout before its first
    /// byte) and size.
    fn next_head(&self) -> (Duration, usize) {
        let limits = self.snapshot.load().limits[self.index];
        (
            limits.keepalive_timeout + limits.request_head_timeout,
            limits.max_request_head,
        )
    }

    /// A new request head is expected, within `max_head` bytes and `deadline`: when it must
    /// be read by.
    fn start_head(budget: &HeadBudget, (deadline, max_head): (Duration, usize)) -> Instant {
        budget.start(max_head);
        Instant::now() + deadline
    }

    /// A new HTTP/1 connection's requests through Pingora's proxy (`keepalive`: its idle
    /// timeout, `None` when the server stops; `first`: the first head's deadline and size).
    async fn proxy_conn(
        &self,
        stream: Stream,
        keepalive: Option<Duration>,
        shutdown: &ShutdownWatch,
        budget: &HeadBudget,
        first: (Duration, usize),
    ) -> Option<Stream> {
        let mut session = ServerSession::new_http1(stream);
        session.set_keepalive(keepalive.map(|k| k.as_secs().max(1)));
        self.proxy_loop(session, shutdown, budget, first).await
    }

    /// An HTTP/1 connection's requests through Pingora's proxy.
    async fn proxy_loop(
        &self,
        mut session: ServerSession,
        shutdown: &ShutdownWatch,
        budget: &HeadBudget,
        mut head: (Duration, usize),
    ) -> Option<Stream> {
        loop {
            let until = Self::start_head(budget, head);
            let serve = pin!(self.proxy.process_new_http(session, shutdown));
            let reused = self.within_deadline(serve, until, budget).await??;
            let (stream, persistent) = reused.consume();
            session = ServerSession::new_http1(stream);
            if let Some(p) = persistent {
                p.apply_to_session(&mut session);
            }
            head = self.next_head();
        }
    }

    /// An HTTP/1 connection's requests through tether's engine, until one is handed over:
    /// then the connection goes on with Pingora's proxy. While the connection is busy its
    /// requests are served by one boxed future ([`Self::engine_busy`]); one that waits
    /// for its next request past the engine's grace gives it back (a request's future is
    /// a few KiB) with its buffers, and waits here on a few dozen bytes.
    async fn engine_loop(
        &self,
        engine: &Engine,
        stream: Stream,
        shutdown: &ShutdownWatch,
        budget: &HeadBudget,
        first: (Duration, usize),
    ) -> Option<Stream> {
        let mut conn = crate::engine::Conn::new(stream);
        let mut until = Self::start_head(budget, first);
        loop {
            let busy = Box::pin(self.engine_busy(engine, conn, shutdown, budget, &mut until));
            match busy.await? {
                Next::Idle(c) => conn = c,
                // The handed-over head was read already; Pingora's proxy lifts its deadline.
                Next::Handover(session) => {
                    let next = self.next_head();
                    let proxy = Box::pin(self.proxy_loop(*session, shutdown, budget, next));
                    return proxy.await;
                }
                Next::KeepAlive(_) | Next::Close => return None,
            }
            // The same request's head deadline goes on.
            let idle = pin!(engine.idle(&mut conn));
            if !self.within_deadline(idle, until, budget).await? {
                return None;
            }
        }
    }

    /// The requests of a busy engine connection, from the one whose head must be read by
    /// `until`: what ends the run ([`Next::Idle`] or [`Next::Handover`], with `until` the
    /// deadline of the request that is not read yet), or `None` when the connection closes.
    async fn engine_busy(
        &self,
        engine: &Engine,
        mut conn: Box<crate::engine::Conn>,
        shutdown: &ShutdownWatch,
        budget: &HeadBudget,
        until: &mut Instant,
    ) -> Option<Next> {
        loop {
            let stopping = *shutdown.borrow();
            let serve = pin!(engine.serve(conn, stopping));
            match self.within_deadline(serve, *until, budget).await? {
                Next::KeepAlive(c) => conn = c,
                Next::Close => return None,
                other => return Some(other),
            }
            *until = Self::start_head(budget, self.next_head());
        }
    }
}

/// Decrements the open-connection count when a connection ends, however it ends.
struct Open<'a>(&'a AtomicUsize);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

#[async_trait]
impl ServerApp for Listener {
    /// Pingora serves each connection in a task of its own sized for the largest future it
    /// may await there, its TLS handshake's (2.5 KiB, held for the connection's life); the
    /// connection goes on at once in a task of tether's, sized for tether's future (whose
    /// TLS is boxed): an idle connection's memory is about halved. Pingora's task ends.
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        let listener = self.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            // A stream given back for reuse is served again, as Pingora's task would.
            let mut next = listener.connection(stream, &shutdown).await;
            while let Some(stream) = next {
                next = listener.connection(stream, &shutdown).await;
            }
        });
        None
    }

    async fn cleanup(&self) {
        if let Some(engine) = &self.engine {
            engine.stop();
        }
        self.proxy.http_cleanup().await;
    }
}

impl Listener {
    /// One connection, from its accept to its end (or a stream to serve again).
    async fn connection(&self, stream: Stream, shutdown: &ShutdownWatch) -> Option<Stream> {
        let limits = self.snapshot.load().limits[self.index];
        let open = self.open.fetch_add(1, Relaxed) + 1;
        let _open = Open(&self.open);
        if open > limits.max_connections {
            metrics::client_closed(&self.name, "max_connections");
            if let Some(n) = self.full_log.due(crate::routing::now_ms()) {
                warn!(
                    "listener {}: {} connections open (max_connections); {n} new ones \
                     closed since the last line",
                    self.name, limits.max_connections
                );
            }
            return None;
        }
        let tls = self.snapshot.load().tls[self.index].clone();
        let fd = stream
            .as_any()
            .downcast_ref::<pingora_core::protocols::l4::stream::Stream>()
            .map(std::os::fd::AsRawFd::as_raw_fd);
        let first = limits.request_head_timeout;
        let stream = if self.snapshot.load().proxy_protocol[self.index].is_some() {
            // The snapshot itself (an `Arc`), not a guard, is held across the read.
            let snapshot = self.snapshot.load_full();
            let from = snapshot.proxy_protocol[self.index]
                .as_deref()
                .unwrap_or(&[]);
            let read = Box::pin(self.proxy_protocol(stream, from, first));
            read.await?
        } else {
            stream
        };
        // Counted from here until the connection ends, however it ends.
        let _client = self.count_client(&stream)?;
        let accept = Box::pin(accept::accept(
            stream,
            tls.as_deref(),
            self.h2c,
            first,
            &self.name,
        ));
        let stream = match accept.await? {
            // HTTP/2 streams are Pingora's (its h2 settings bound them); the connection
            // still counts in `max_connections` until it ends.
            accept::Speaks::Http2(stream) => {
                let h2 = Box::pin(<HttpProxy<TetherProxy> as ServerApp>::process_new(
                    &self.proxy,
                    stream,
                    shutdown,
                ));
                return h2.await;
            }
            accept::Speaks::Http1(stream) => stream,
        };
        let budget = Arc::new(HeadBudget::default());
        if let Some(fd) = fd {
            budget.set_fd(fd);
        }
        let limited = HeadLimited::new(stream, budget.clone());
        // The first head: from the connection's start.
        let first = (limits.request_head_timeout, limits.max_request_head);
        // The head budget is the connection's: one task-local scope for all its requests.
        // A connection's task is as large as the largest future it may await, and it
        // lives as long as the connection: what only some connections or some moments
        // need (the PROXY header, TLS, HTTP/2, pingora-proxy, a request in flight) is
        // boxed, each box made in a statement of its own (a temporary of `Box::pin(f).await`
        // keeps its place in the task until the statement ends). An idle engine
        // connection's task is then about a kilobyte.
        HEAD.scope(budget.clone(), async {
            if let Some(engine) = &self.engine {
                return self
                    .engine_loop(engine, Box::new(limited), shutdown, &budget, first)
                    .await;
            }
            let keepalive = (!*shutdown.borrow()).then_some(limits.keepalive_timeout);
            let limited = Box::new(limited);
            let proxy = Box::pin(self.proxy_conn(limited, keepalive, shutdown, &budget, first));
            proxy.await
        })
        .await
    }
}
