//! An HTTP/1 connection on tether's engine, from its first request to its end: busy runs of
//! requests, each in a box while it lasts; between them the connection's task waits for
//! the next request (`Listener::task`), and that wait is then the whole of its future (a
//! few hundred bytes, as nginx keeps a waiting connection in a few hundred bytes).

use super::{Listener, Open, HEAD};
use crate::client_limits;
use crate::engine::{Conn, Engine, Held, Next};
use crate::head_limit::HeadBudget;
use pingora_core::protocols::Stream;
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

/// How a busy run ended.
pub(super) enum Run {
    /// The connection waits for its next request (its buffers given back).
    Idle,
    /// The connection ended; or, handed over to Pingora's proxy, a stream to serve again.
    Ended(Option<Stream>),
}

impl Listener {
    /// One busy run of the connection's requests through tether's engine, until it waits
    /// for its next request past the engine's grace, or ends. A request the engine does
    /// not take is handed over: the connection then goes on with Pingora's proxy.
    pub(super) async fn engine_run(&self, c: &mut EngineConn) -> Run {
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
            Some(Next::Idle(idle)) => {
                c.held = Held::Idle(idle);
                Run::Idle
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
        loop {
            let stopping = *self.shutdown().borrow();
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
