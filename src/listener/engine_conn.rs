//! An HTTP/1 connection on tether's engine, from its first request to its end: busy runs of
//! requests, each in a box while it lasts, and between them the wait for the next request
//! inline in the connection's task, which is then the whole of its future (a few hundred
//! bytes, as nginx keeps a waiting connection in a few hundred bytes).

use super::{Listener, Open, HEAD};
use crate::client_limits;
use crate::engine::{Conn, Engine, Next, Woke};
use crate::head_limit::HeadBudget;
use crate::metrics;
use pingora_core::protocols::Stream;
use pingora_core::server::ShutdownWatch;
use std::pin::pin;
use std::sync::Arc;
use std::time::Instant;

/// An engine connection and what it holds until it ends.
pub(super) struct EngineConn<'a> {
    /// The connection's stream and buffers: out while a busy run has them.
    pub(super) conn: Option<Box<Conn>>,
    /// The head budget its reads are bounded by.
    pub(super) budget: Arc<HeadBudget>,
    /// When the head being read must be complete.
    pub(super) until: Instant,
    /// Counted as open (`max_connections`) and against its client's limit, until it ends.
    pub(super) _open: Open<'a>,
    pub(super) _client: Option<client_limits::Open>,
}

impl Listener {
    /// The connection's requests through tether's engine, until one is handed over: then
    /// the connection goes on with Pingora's proxy. A connection that waits for its next
    /// request past the engine's grace gives back its buffers and its busy run's box, and
    /// waits here, without the head budget's task-local (no request is served meanwhile).
    pub(super) async fn engine_conn(
        &self,
        c: &mut EngineConn<'_>,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        // `c` is the caller's: each local here is a part of every idle connection's task.
        let engine = self.engine.as_ref()?;
        loop {
            let busy = Box::pin(HEAD.scope(
                c.budget.clone(),
                self.engine_busy(engine, c.conn.take()?, shutdown, &c.budget, &mut c.until),
            ));
            match busy.await? {
                Next::Idle(conn) => c.conn = Some(conn),
                // The handed-over head was read already; Pingora's proxy lifts its deadline.
                Next::Handover(session) => {
                    let next = self.next_head();
                    let proxy = Box::pin(HEAD.scope(
                        c.budget.clone(),
                        self.proxy_loop(*session, shutdown, &c.budget, next),
                    ));
                    return proxy.await;
                }
                Next::KeepAlive(_) | Next::Close => return None,
            }
            // The same request's head deadline goes on.
            let woke = engine.idle(c.conn.as_mut()?, c.until).await;
            if c.budget.take_exceeded() {
                metrics::client_closed(&self.name, "request_head_too_large");
            }
            match woke {
                Woke::Request => {}
                Woke::TimedOut => {
                    metrics::client_closed(&self.name, "request_head_timeout");
                    return None;
                }
                Woke::Closed | Woke::Stopping => return None,
            }
        }
    }

    /// The requests of a busy engine connection, from the one whose head must be read by
    /// `until`: what ends the run ([`Next::Idle`] or [`Next::Handover`], with `until` the
    /// deadline of the request that is not read yet), or `None` when the connection closes.
    async fn engine_busy(
        &self,
        engine: &Engine,
        mut conn: Box<Conn>,
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
