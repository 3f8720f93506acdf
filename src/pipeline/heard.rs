//! What a server's answer head does, for every front end: an interim answer is counted
//! (more than [`MAX_INFORMATIONAL`] to one request is a broken server); a `fail_on_status`
//! status fails the try as in mod_jk: the answer is dropped, the server marked down (not
//! for a negative code), and the request sent on while a retry is allowed, else a 503; a
//! `retry_on` status sends the request on while another server could take it; a final
//! answer teaches the partition table its `$WSPT`, tracks the session its `Set-Cookie`
//! starts, and marks the server up, and at `replace_server_errors` or above has its body
//! replaced. A failed connect marks the server down too.

use super::RequestCtx;
use crate::routing::{ms_at, now_ms, ClusterRouter, Fields, ServerSlot};
use crate::wire::http1::response::is_final;
use http::HeaderName;
use log::{debug, info, warn};

/// Most informational (1xx) answers relayed for one request; a server sending more is
/// treated as broken (502), so it cannot keep a client busy with an endless stream.
pub const MAX_INFORMATIONAL: u8 = 16;

/// What an answer head of the server's means for the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// An interim (1xx) answer: relayed, and the final one is awaited.
    Interim,
    /// One interim answer too many: the server is broken (502).
    TooManyInterim,
    /// A `fail_on_status` status (mod_jk): the answer is dropped, and the request goes to
    /// the next server.
    Retry,
    /// A `fail_on_status` status, and the request may not go again: the answer is
    /// dropped, and the client gets [`FAILED_STATUS`].
    Failed,
    /// The final answer, relayed.
    Final,
    /// The final answer, whose body tether replaces with its page for the status
    /// (`replace_server_errors`, mod_jk's `use_server_errors`); the server's is dropped.
    Replace,
}

/// The answer to a request whose last try failed on a `fail_on_status` status (mod_jk's).
pub const FAILED_STATUS: u16 = 503;

static WSPT: HeaderName = HeaderName::from_static("$wspt");

/// The server of the request's current try answered `status` with `fields`; `may_retry`
/// says whether the front end could send the request again (its body still whole, and
/// idempotent or `retry_non_idempotent`), asked only of a status that fails the try
/// (`fail_on_status`, `retry_on`).
pub fn heard(
    ctx: &mut RequestCtx,
    status: u16,
    fields: &impl Fields,
    may_retry: impl FnOnce() -> bool,
) -> Heard {
    if !is_final(status) {
        ctx.informational = ctx.informational.saturating_add(1);
        return match ctx.informational > MAX_INFORMATIONAL {
            true => Heard::TooManyInterim,
            false => Heard::Interim,
        };
    }
    let (Some(router), Some(i)) = (&ctx.router, ctx.server) else {
        return Heard::Final;
    };
    let slot = &router.servers()[i];
    if let Some(mark_down) = router.fails_on(status) {
        if mark_down {
            status_failed(router, slot, status);
        }
        return match ctx.may_try_again() && may_retry() {
            true => Heard::Retry,
            false => Heard::Failed,
        };
    }
    // `retry_on` a status: the next server, the server not marked down; the last try's
    // answer is relayed (so is one no other server could take instead).
    if router.retries_on(status)
        && ctx.may_try_again()
        && router.another_could_take(&ctx.tried, now_ms())
        && may_retry()
    {
        return Heard::Retry;
    }
    if router.is_websphere() {
        let learned = router.learn_wspt_response(fields.values(&WSPT));
        if learned.refused.is_some() || learned.unknown_clone > 0 || learned.full > 0 {
            debug!(
                "cluster {} server {}: $WSPT partly or wholly refused: {learned:?}",
                router.name, slot.config.name
            );
        }
    }
    let set_cookies = fields.values(&http::header::SET_COOKIE);
    router.track(ctx.session_key, set_cookies, i, ms_at(ctx.start));
    if slot.live.mark_up() {
        info!(
            "cluster {} server {} ({}) is answering again: marked up",
            router.name, slot.config.name, slot.config.address
        );
    }
    match router.replace_server_errors {
        from if from > 0 && status >= from => Heard::Replace,
        _ => Heard::Final,
    }
}

/// The server answered a `fail_on_status` status (mod_jk): it is in error, and marked
/// down.
fn status_failed(router: &ClusterRouter, slot: &ServerSlot, status: u16) {
    let why = format!(
        "answered {status}, a fail_on_status status ({})",
        slot.config.address
    );
    if slot.live.mark_down_because(now_ms(), &why) {
        warn!(
            "cluster {} server {} marked down: {why}",
            router.name, slot.config.name
        );
    }
}

/// A connection to the request's current server failed (`why`, in words): the server is
/// marked down, and the answer says whether another try is allowed (`retry_on`'s
/// `connect_failure`, within `max_attempts` and `retry_timeout`).
pub fn connect_failed(ctx: &RequestCtx, why: &str) -> bool {
    marked_failed(ctx, why) && ctx.router.as_ref().is_some_and(|r| r.retry.connect_failure)
}

/// A new connection was closed or reset before any byte of an answer ([`super::DROPPED`] or
/// another `why`): the server is marked down as after a failed connect, and the answer
/// says whether another try is allowed (`retry_on`'s `empty_response`).
pub fn dropped(ctx: &RequestCtx, why: &str) -> bool {
    marked_failed(ctx, why) && ctx.router.as_ref().is_some_and(|r| r.retry.empty_response)
}

/// Marks the current server down for `why`; whether the request may try again.
fn marked_failed(ctx: &RequestCtx, why: &str) -> bool {
    let (Some(router), Some(i)) = (&ctx.router, ctx.server) else {
        return false;
    };
    let slot = &router.servers()[i];
    if let Some(m) = &ctx.metrics {
        m.connect_failed(i);
    }
    if slot.live.mark_down_because(now_ms(), why) {
        warn!(
            "cluster {} server {} marked down: {why}",
            router.name, slot.config.name
        );
    }
    ctx.may_try_again()
}
