//! An HTTP/1 connection on tether's engine, from its first request to its end: busy runs of
//! requests, each in a box while it lasts; between them the connection's task waits for
//! the next request (`Listener::task`), and that wait is then the whole of its future (a
//! few hundred bytes, as nginx keeps a waiting connection in a few hundred bytes). A plain
//! TCP connection waits there no longer than the engine's grace: then it is parked
//! ([`Listener::park`]) in its listener's accept loop (`park.rs`), with no task at all, and
//! served again in a new task when its next bytes come ([`Listener::resumed`]).

use super::tcp::{self, TcpClient};
use super::{Listener, Open, Setup, HEAD};
use crate::front::engine::{Conn, Engine, Grace, Held, Next};
use crate::front::head_limit::{HeadBudget, HeadLimited};
use crate::state::client_limits;
use pingora_core::protocols::{Stream, UniqueID};
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Instant;

/// An engine connection and what it holds until it ends.
pub(super) struct EngineConn {
    /// The connection: its whole record, or, while it waits for a next request, what is
    /// left of it; gone while a busy run has it.
    pub(super) held: Held,
    /// The head budget its reads are bounded by.
    pub(super) budget: Arc<HeadBudget>,
    /// When the head being read must be complete.
    pub(super) until: Instant,
    /// Counted as open (`max_connections`) and against its client's limit (boxed: only
    /// listeners with `client_limits` count, and the box keeps the task small), until it
    /// ends.
    pub(super) _open: Open,
    pub(super) _client: Option<Box<client_limits::Open>>,
}

/// What a parked connection keeps, besides its socket and its head deadline, to be served
/// again: its client's address and its places in the connection counts.
pub struct Resume {
    peer: SocketAddr,
    _open: Open,
    _client: Option<Box<client_limits::Open>>,
}

/// A connection on its way to its listener's park: the socket (out of tokio), when its
/// next head must be read by, and the rest of it.
pub type ToPark = (std::net::TcpStream, Instant, Resume);

/// How a busy run ended.
pub(super) enum Run {
    /// The connection waits for its next request (its buffers given back), the engine's
    /// grace over or still to wait.
    Idle(Grace),
    /// The connection ended; or, handed over to Pingora's proxy, a stream to serve again.
    Ended(Option<Stream>),
}

impl Listener {
    /// Parks a connection that waits for its next request (`Held::Idle`) in its
    /// listener's accept loop, when it is a plain TCP one and the listener parks: then its
    /// task can end. Given back otherwise, to wait in its task.
    pub(super) fn park(&self, c: EngineConn) -> Result<(), EngineConn> {
        let (Some(to_park), Held::Idle(idle)) = (self.parking.get(), &c.held) else {
            return Err(c);
        };
        let plain = idle
            .stream()
            .as_any()
            .downcast_ref::<HeadLimited>()
            .is_some_and(|limited| limited.inner().as_any().is::<TcpClient>());
        if !plain {
            return Err(c);
        }
        let EngineConn {
            held: Held::Idle(idle),
            until,
            _open,
            _client,
            ..
        } = c
        else {
            unreachable!("checked above");
        };
        let Ok(limited) = (*idle).into_stream().into_any().downcast::<HeadLimited>() else {
            unreachable!("checked above");
        };
        let Ok(client) = limited.into_inner().into_any().downcast::<TcpClient>() else {
            unreachable!("checked above");
        };
        let (io, peer) = client.into_parts();
        // Out of this thread's reactor; a socket that cannot be is closed.
        if let Ok(socket) = io.into_std() {
            let resume = Resume {
                peer,
                _open,
                _client,
            };
            // The accept loop is gone when the server stops: the connection closes, as an
            // idle one does then.
            let _ = to_park.send((socket, until, resume));
        }
        Ok(())
    }

    /// A parked connection whose next request's first bytes, `first`, came, on a socket
    /// registered with the serving thread's reactor: its requests, in a new task, as from
    /// its wait (its head deadline goes on).
    pub(super) fn resumed(
        self: Arc<Self>,
        io: tokio::net::TcpStream,
        until: Instant,
        resume: Resume,
        first: &[u8],
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let Resume {
            peer,
            _open,
            _client,
        } = resume;
        let stream: Stream = Box::new(TcpClient::new(io, peer));
        let budget = Arc::new(HeadBudget::default());
        budget.set_fd(UniqueID::id(&*stream));
        budget.start(self.snapshot.load().limits[self.index].max_request_head);
        let addresses = tcp::addresses(&stream);
        let limited = HeadLimited::new(stream, budget.clone());
        let c = EngineConn {
            held: Held::Busy(Conn::starting_with(Box::new(limited), addresses, first)),
            budget,
            until,
            _open,
            _client,
        };
        self.run(Box::pin(std::future::ready(Setup::Engine(c))))
    }

    /// One busy run of the connection's requests through tether's engine, until it waits
    /// for its next request without its buffers (an idle one has no run), or ends. A
    /// request the engine does not take is handed over: the connection then goes on with
    /// Pingora's proxy.
    pub(super) async fn engine_run(&self, c: &mut EngineConn) -> Run {
        if matches!(c.held, Held::Idle(_)) {
            return Run::Idle(Grace::Over);
        }
        let (Some(engine), Held::Busy(conn)) = (
            self.engine.as_ref(),
            std::mem::replace(&mut c.held, Held::Gone),
        ) else {
            return Run::Ended(None);
        };
        let busy = Box::pin(HEAD.scope(
            c.budget.clone(),
            self.engine_busy(engine, conn, &c.budget, &mut c.until),
        ));
        match busy.await {
            Some(Next::Idle(idle, grace)) => {
                c.held = Held::Idle(idle);
                Run::Idle(grace)
            }
            // The handed-over head was read already; Pingora's proxy lifts its deadline.
            Some(Next::Handover(session)) => {
                let next = self.next_head();
                let proxy = Box::pin(HEAD.scope(
                    c.budget.clone(),
                    self.proxy_loop(*session, self.shutdown(), &c.budget, next),
                ));
                Run::Ended(proxy.await)
            }
            Some(Next::KeepAlive(_) | Next::Close) | None => Run::Ended(None),
        }
    }

    /// The requests of a busy engine connection, from the one whose head must be read by
    /// `until`: what ends the run ([`Next::Idle`] or [`Next::Handover`], with `until` the
    /// deadline of the request that is not read yet), or `None` when the connection closes.
    async fn engine_busy(
        &self,
        engine: &Engine,
        mut conn: Box<Conn>,
        budget: &HeadBudget,
        until: &mut Instant,
    ) -> Option<Next> {
        // A run starts with a new connection or with its next request's first bytes read:
        // its first request is read even if the server stops meanwhile.
        let mut first = true;
        loop {
            let stopping = *self.shutdown().borrow();
            let serve = pin!(engine.serve(conn, stopping, first));
            first = false;
            match self.within_deadline(serve, *until, budget).await? {
                Next::KeepAlive(c) => conn = c,
                Next::Close => return None,
                other => return Some(other),
            }
            *until = Self::start_head(budget, self.next_head());
        }
    }
}
