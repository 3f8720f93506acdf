//! A try's slot on its server (`max_inflight`), for every front end: taken at once when
//! the server has room; a new session whose server is full goes to the next server with
//! room, as the balance picks it; a request bound to its server (a session's, or a new one
//! when none has room) waits in that server's queue, and is never moved to another server
//! while its own is only busy. No slot: `Reject::Busy` (503 with `Retry-After`).

use super::{Front, RequestCtx};
use crate::routing::{now_ms, Decision, Full, Outcome, Reject};

/// The decision, its server's slot taken into `ctx.slot`, or a refusal. The common case
/// (a server with room, or without a bound) is [`take_now`], one atomic operation and no
/// future; callers on the request path call it first and this only when it fails.
pub async fn take(ctx: &mut RequestCtx, front: &impl Front, decision: Decision) -> Decision {
    match take_now(ctx, decision) {
        Ok(decision) => decision,
        // Boxed: the queue's wait is rare, and the request's future stays small without it.
        Err(full) => Box::pin(wait(ctx, front, full)).await,
    }
}

/// The decision with its slot taken now (or no slot needed); `Err` when its server is full
/// (then [`take`]).
#[inline]
pub fn take_now(ctx: &mut RequestCtx, decision: Decision) -> Result<Decision, Decision> {
    // The previous try is over: its slot goes back before this one takes another.
    ctx.slot = None;
    let (Decision::Route { server, .. }, Some(router)) = (decision, &ctx.router) else {
        return Ok(decision);
    };
    match router.servers()[server].live.slots().try_take() {
        Some(slot) => {
            ctx.slot = Some(slot);
            Ok(decision)
        }
        None => Err(decision),
    }
}

/// A full server's decision: another with room for a new session, else a slot from the
/// queue of the server chosen first, or a refusal.
async fn wait(ctx: &mut RequestCtx, front: &impl Front, decision: Decision) -> Decision {
    let router = ctx.router.clone().expect("a full server is a router's");
    let Decision::Route { server, outcome } = decision else {
        return decision;
    };
    let slots = router.servers()[server].live.slots();
    if outcome == Outcome::NewSession {
        // The balance's next choice among the servers with room; the ones found full are
        // left out as the ones tried are.
        let mut full = ctx.tried;
        full.push(server);
        for _ in 1..router.servers().len() {
            let next = router
                .decide_keyed(front.target(), front, &full, now_ms(), None)
                .0;
            let Decision::Route { server: other, .. } = next else {
                break;
            };
            if let Some(slot) = router.servers()[other].live.slots().try_take() {
                ctx.slot = Some(slot);
                return next;
            }
            full.push(other);
        }
    }
    // Bound to its server, or none has room: the queue of the server chosen first.
    let queue = router.queue;
    let started = crate::poll_time::now();
    let waited = slots.take(queue.length, queue.timeout).await;
    if let Some(m) = &ctx.metrics {
        m.queued(
            server,
            started.elapsed().as_secs_f64(),
            waited.as_ref().err().copied(),
        );
    }
    match waited {
        Ok(slot) => {
            ctx.slot = Some(slot);
            decision
        }
        Err(Full::QueueFull | Full::Timeout) => Decision::Reject(Reject::Busy),
    }
}
