//! A try's slot on its server (`max_inflight`), for every front end: taken at once when
//! the server has room; a new session whose server is full goes to the next server with
//! room, as the balance picks it, and when none has room waits in the cluster's queue for
//! the first slot any server hands back; a request bound to its server (a session's)
//! waits in that server's queue, and is never moved to another server while its own is
//! only busy. No slot: `Reject::Busy` (503 with `Retry-After`).

use super::{Front, RequestCtx};
use crate::routing::{now_ms, ClusterRouter, Decision, Full, Outcome, Reject, Slot, Tried};

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

/// The decision with its slot taken now (or no slot needed); `Err` when its server is full,
/// or when it is a new session and others wait in the cluster's queue before it (then
/// [`take`]).
#[inline]
pub fn take_now(ctx: &mut RequestCtx, decision: Decision) -> Result<Decision, Decision> {
    // The previous try is over: its slot goes back before this one takes another.
    ctx.slot = None;
    let (Decision::Route { server, outcome }, Some(router)) = (decision, &ctx.router) else {
        return Ok(decision);
    };
    if outcome == Outcome::NewSession && router.waiting.queued() > 0 {
        return Err(decision);
    }
    match router.servers()[server].live.slots().try_take() {
        Some(slot) => {
            ctx.slot = Some(slot);
            Ok(decision)
        }
        None => Err(decision),
    }
}

/// A full server's decision: another with room for a new session, else a slot from a
/// queue (the server's for a session bound to it, the cluster's for a new one), or a
/// refusal.
async fn wait(ctx: &mut RequestCtx, front: &impl Front, decision: Decision) -> Decision {
    let router = ctx.router.clone().expect("a full server is a router's");
    let Decision::Route { server, outcome } = decision else {
        return decision;
    };
    let (queue, tried) = (router.queue, ctx.tried);
    let started = crate::base::poll_time::now();
    let waited = if outcome == Outcome::NewSession {
        if router.waiting.queued() == 0 {
            if let Some((next, slot)) = with_room(&router, front, tried) {
                ctx.slot = Some(slot);
                return next;
            }
        }
        // None has room, or others wait before it: the first slot any server hands back,
        // by the balance among the servers with room then.
        let mut found = None;
        let waited = router
            .waiting
            .wait(queue.length, queue.timeout, || {
                let (next, slot) = with_room(&router, front, tried)?;
                found = Some(next);
                Some(slot)
            })
            .await;
        observe(ctx, None, started, waited.as_ref().err().copied());
        waited.map(|slot| (found.expect("a slot comes with its decision"), slot))
    } else {
        let slots = router.servers()[server].live.slots();
        let waited = slots.take(queue.length, queue.timeout).await;
        observe(ctx, Some(server), started, waited.as_ref().err().copied());
        waited.map(|slot| (decision, slot))
    };
    match waited {
        Ok((decision, slot)) => {
            ctx.slot = Some(slot);
            decision
        }
        Err(Full::QueueFull | Full::Timeout) => Decision::Reject(Reject::Busy),
    }
}

/// The balance's choice among the servers with room now, its slot taken; the servers
/// found full are left out as the ones tried are.
fn with_room(router: &ClusterRouter, front: &impl Front, tried: Tried) -> Option<(Decision, Slot)> {
    let mut full = tried;
    for _ in 0..router.servers().len() {
        let next = router
            .decide_keyed(front.target(), front, &full, now_ms(), None)
            .0;
        let Decision::Route { server, .. } = next else {
            return None;
        };
        if let Some(slot) = router.servers()[server].live.slots().try_take() {
            return Some((next, slot));
        }
        full.push(server);
    }
    None
}

/// A wait in a queue (`server`'s, or the cluster's for `None`) and how it ended.
fn observe(
    ctx: &RequestCtx,
    server: Option<usize>,
    started: std::time::Instant,
    refused: Option<Full>,
) {
    if let Some(m) = &ctx.metrics {
        m.queued(server, started.elapsed().as_secs_f64(), refused);
    }
}
