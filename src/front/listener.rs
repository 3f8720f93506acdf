//! One proxy listener's connections, around Pingora's HTTP proxy: the cap on open
//! connections and the deadline for a whole request head (slowloris), which Pingora does
//! not have (it bounds each read, not the head, and not at all on a reused connection).
//!
//! The HTTP/1 connection loop is Pingora's own (`HttpServerApp`'s `process_new`), with three
//! additions: a connection over `max_connections` is closed at once; the connection's reads
//! are bounded by `max_request_head` while a head is read ([`crate::front::head_limit`]); and each
//! request is raced against its head deadline. The proxy marks the head as read
//! (`head_read`) in its first phase; a deadline that passes before that drops the request,
//! which closes the connection. Nothing was sent upstream then, so nothing is cut short.
//!
//! With `http1: engine` (the default), HTTP/1 requests go through tether's own engine
//! ([`crate::front::engine`]) instead, until one it does not take is handed over; the connection
//! then stays with Pingora's proxy.
//!
//! The connections come from Pingora's listening service, or, on a plain listener of the
//! engine, from tether's own accept loop ([`accept_loop`]), which makes no Pingora stream
//! for them ([`tcp`]).

mod accept;
pub mod accept_loop;
mod engine_conn;
mod open;
pub mod park;
pub mod proxy_protocol;
pub mod tcp;

use crate::front::head_limit::{HeadBudget, HeadLimited, HEAD};
use engine_conn::{EngineConn, Run};
pub use engine_conn::{Resume, ToPark};
pub use open::{open_connections, OpenInProcess};

use crate::base::poll_time;
use crate::front::engine::{Engine, Grace, Woke, IDLE_GRACE};
use crate::front::proxy::TetherProxy;
use crate::metrics;
use crate::state::client_limits;
use crate::state::snapshot::SharedSnapshot;
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
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub struct Listener {
    proxy: Arc<HttpProxy<TetherProxy>>,
    snapshot: SharedSnapshot,
    index: usize,
    name: String,
    open: AtomicUsize,
    /// The "max_connections reached" line, at most once every 10 s.
    full_log: crate::base::every::Every,
    /// Plain HTTP/2 (prior knowledge) is allowed (fixed at start).
    h2c: bool,
    /// tether's HTTP/1 engine, when the listener has `http1: engine` (fixed at start).
    engine: Option<Engine>,
    /// tether's HTTP/2 front end, when the listener has `http2: engine` (fixed at start).
    http2: Option<crate::front::http2::Http2>,
    /// The server's stop, as Pingora hands it to the service that runs the listener: set
    /// before its first connection ([`Listener::watch_stop`]). Held here, not by each
    /// connection's task, which it would make 16 bytes larger.
    stop: OnceLock<ShutdownWatch>,
    /// Where an idle plain engine connection is parked: its listener's accept loop
    /// (`accept_loop.rs`), which sets it when it starts. Unset (listeners on Pingora's
    /// accept), idle connections wait in their tasks.
    parking: OnceLock<tokio::sync::mpsc::UnboundedSender<ToPark>>,
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
        (engine, http2): (Option<Engine>, Option<crate::front::http2::Http2>),
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
            full_log: crate::base::every::Every::new(10_000),
            h2c,
            engine,
            http2,
            stop: OnceLock::new(),
            parking: OnceLock::new(),
        }
    }

    /// Idle plain connections are parked by sending them to `to_park` (set once).
    pub fn park_in(&self, to_park: tokio::sync::mpsc::UnboundedSender<ToPark>) {
        let _ = self.parking.set(to_park);
    }

    /// Takes the server's stop signal (the first call's; every service hands over the
    /// same one). Called before the listener's first connection.
    pub fn watch_stop(&self, shutdown: &ShutdownWatch) {
        if self.stop.get().is_none() {
            let _ = self.stop.set(shutdown.clone());
        }
    }

    fn shutdown(&self) -> &ShutdownWatch {
        self.stop
            .get()
            .expect("the listener's service hands over the stop signal before a connection")
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
        let Some(peer) = tcp::peer_ip(stream) else {
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
        crate::base::poll_time::now() + deadline
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
}

/// What a new connection's setup ends in.
enum Setup {
    /// Served to its end (Pingora's proxy, HTTP/2) or refused; a stream to serve again.
    Done(Option<Stream>),
    /// An HTTP/1 connection for tether's engine, its first request not read yet.
    Engine(EngineConn),
}

/// Decrements the open-connection counts when a connection ends, however it ends.
struct Open(Arc<Listener>, OpenInProcess);

impl Open {
    /// Counts a new connection of `listener`: how many it has open now.
    fn new(listener: &Arc<Listener>) -> (usize, Open) {
        let in_process = OpenInProcess::count();
        let open = listener.open.fetch_add(1, Relaxed) + 1;
        (open, Open(listener.clone(), in_process))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Relaxed);
    }
}

#[async_trait]
impl ServerApp for Listener {
    /// Pingora serves each connection in a task of its own sized for the largest future it
    /// may await there, its TLS handshake's (2.5 KiB, held for the connection's life); the
    /// connection goes on at once in a task of tether's. That task holds, inline, only what
    /// an idle engine connection needs while it waits for its next request (a few hundred
    /// bytes); the setup (PROXY header, TLS, HTTP/2, Pingora's proxy) and each busy run of
    /// requests are boxed while they last. Pingora's task ends.
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        self.watch_stop(shutdown);
        tokio::spawn(self.clone().task(stream));
        None
    }

    /// The stop, once the listener accepts no more. Pingora's proxy closes every connection
    /// that waits for a request when its cleanup runs, a new one whose request is on its way
    /// too, which its client would see fail unanswered: the cleanup comes the engine's grace
    /// later, which is what the engine gives a new connection's first request.
    async fn cleanup(&self) {
        if let Some(engine) = &self.engine {
            engine.stop();
        }
        tokio::time::sleep(IDLE_GRACE).await;
        self.proxy.http_cleanup().await;
    }
}

impl Listener {
    /// The task of a new connection: its setup, then its requests until it ends or, on
    /// plain TCP, is parked between two requests (its task then ends). Each value this
    /// future keeps across the engine's wait for a next request (a TLS connection's) is a
    /// part of every such idle connection (`-Zprint-type-sizes` shows them; about 280 bytes at most keep the
    /// task in jemalloc's 384-byte class): the setup is boxed here, so the task keeps its
    /// pointer, not the stream; no value is matched on across the wait (it would live to
    /// the match's end); the engine and the stop signal are the listener's.
    pub fn task(self: Arc<Self>, stream: Stream) -> impl Future<Output = ()> + Send + 'static {
        // The box is freed when its await ends, before the engine's requests.
        let setup = Box::pin(Self::connection(self.clone(), stream));
        self.run(setup)
    }

    /// A connection's requests after `setup` (a new connection's, or a parked one's
    /// record, ready), until it ends or is parked. One future around `self` and `setup`,
    /// the loop inline: a nested `async fn` would keep its arguments again, which took the
    /// task past jemalloc's 384-byte class.
    fn run(
        self: Arc<Self>,
        setup: Pin<Box<impl Future<Output = Setup> + Send + 'static>>,
    ) -> impl Future<Output = ()> + Send + 'static {
        // Each poll reads the clock at most once, for every deadline and duration in it.
        crate::base::poll_time::PollTimed::new(async move {
            let mut c = match setup.await {
                Setup::Done(again) => return self.serve_again(again),
                Setup::Engine(c) => c,
            };
            loop {
                // The same request's head deadline goes on. A connection that gave its
                // buffers back before the engine's grace was over waits the rest of it
                // here; then (its next run is none) it is parked.
                let wait = match self.engine_run(&mut c).await {
                    Run::Ended(again) => return self.serve_again(again),
                    Run::Idle(Grace::Left) => c.until.min(poll_time::now() + IDLE_GRACE),
                    Run::Idle(Grace::Over) => {
                        c = match self.park(c) {
                            Ok(()) => return,
                            Err(c) => c,
                        };
                        c.until
                    }
                };
                let woke = match &self.engine {
                    Some(engine) => engine.idle(&mut c.held, wait).await,
                    None => return,
                };
                if c.budget.take_exceeded() {
                    metrics::client_closed(&self.name, "request_head_too_large");
                }
                match woke {
                    Woke::Request => {}
                    // The grace is over, not the head's time.
                    Woke::TimedOut if poll_time::now() < c.until => {}
                    Woke::TimedOut => {
                        metrics::client_closed(&self.name, "request_head_timeout");
                        return;
                    }
                    Woke::Closed | Woke::Stopping => return,
                }
            }
        })
    }

    /// A stream given back for reuse is served again, as Pingora's task would (in a task
    /// of its own).
    fn serve_again(self: Arc<Self>, again: Option<Stream>) {
        if let Some(stream) = again {
            tokio::spawn(self.task(stream));
        }
    }

    /// One connection, from its accept to its end (or a stream to serve again), or, for
    /// tether's engine, to its first request.
    async fn connection(self: Arc<Self>, stream: Stream) -> Setup {
        let shutdown = self.shutdown();
        let limits = self.snapshot.load().limits[self.index];
        let (open, _open) = Open::new(&self);
        if open > limits.max_connections {
            metrics::client_closed(&self.name, "max_connections");
            if let Some(n) = self.full_log.due(crate::routing::now_ms()) {
                warn!(
                    "listener {}: {} connections open (max_connections); {n} new ones \
                     closed since the last line",
                    self.name, limits.max_connections
                );
            }
            return Setup::Done(None);
        }
        let tls = self.snapshot.load().tls[self.index].clone();
        let proxy_protocol = self.snapshot.load().proxy_protocol[self.index].is_some();
        // TLS, the PROXY header and h2c's look at the first bytes take Pingora's stream.
        let stream = if tls.is_some() || proxy_protocol || self.h2c {
            tcp::into_l4(stream)
        } else {
            stream
        };
        let fd = pingora_core::protocols::UniqueID::id(&*stream);
        let first = limits.request_head_timeout;
        let stream = if proxy_protocol {
            // The snapshot itself (an `Arc`), not a guard, is held across the read.
            let snapshot = self.snapshot.load_full();
            let from = snapshot.proxy_protocol[self.index]
                .as_deref()
                .unwrap_or(&[]);
            let read = Box::pin(self.proxy_protocol(stream, from, first));
            match read.await {
                Some(stream) => stream,
                None => return Setup::Done(None),
            }
        } else {
            stream
        };
        // Counted from here until the connection ends, however it ends.
        let Some(client) = self.count_client(&stream) else {
            return Setup::Done(None);
        };
        let accept = Box::pin(accept::accept(
            stream,
            tls.as_deref(),
            self.h2c,
            first,
            &self.name,
        ));
        let stream = match accept.await {
            None => return Setup::Done(None),
            // HTTP/2 is tether's own front end's, but for plugins that change messages,
            // which only Pingora's proxy runs; the connection still counts in
            // `max_connections` until it ends.
            Some(accept::Speaks::Http2(stream)) => {
                if let Some(http2) = self.http2.as_ref() {
                    if !self.snapshot.load().plugins_edit() {
                        let (peer, local) = tcp::addresses(&stream);
                        let link = crate::front::streams::Link {
                            peer,
                            local,
                            tls: stream.get_ssl_digest(),
                            proxy: stream.get_proxy_digest(),
                        };
                        let served = Box::pin(http2.serve(stream, link, shutdown.clone()));
                        served.await;
                        return Setup::Done(None);
                    }
                }
                let h2 = Box::pin(<HttpProxy<TetherProxy> as ServerApp>::process_new(
                    &self.proxy,
                    stream,
                    shutdown,
                ));
                return Setup::Done(h2.await);
            }
            Some(accept::Speaks::Http1(stream)) => stream,
        };
        let budget = Arc::new(HeadBudget::default());
        budget.set_fd(fd);
        // The first head: from the connection's start.
        let first = (limits.request_head_timeout, limits.max_request_head);
        if self.engine.is_some() {
            let addresses = tcp::addresses(&stream);
            let limited = HeadLimited::new(stream, budget.clone());
            return Setup::Engine(EngineConn {
                held: crate::front::engine::Held::Busy(crate::front::engine::Conn::new(
                    Box::new(limited),
                    addresses,
                )),
                until: Self::start_head(&budget, first),
                budget,
                _open,
                _client: client.map(Box::new),
            });
        }
        // The head budget is the connection's: one task-local scope for all its requests.
        // What only some connections or some moments need (the PROXY header, TLS, HTTP/2,
        // pingora-proxy) is boxed, each box made in a statement of its own (a temporary
        // of `Box::pin(f).await` keeps its place in the future until the statement ends).
        let keepalive = (!*shutdown.borrow()).then_some(limits.keepalive_timeout);
        let limited = Box::new(HeadLimited::new(stream, budget.clone()));
        let proxy = Box::pin(HEAD.scope(
            budget.clone(),
            self.proxy_conn(limited, keepalive, shutdown, &budget, first),
        ));
        let _client = client;
        Setup::Done(proxy.await)
    }
}
