//! A request's tries of servers, for every front end that carries out the exchange itself
//! (tether's HTTP/1 engine, its HTTP/2 front end): the routing decision's server tried,
//! and after a failure the next decision (a failed connect, a `fail_on_status` answer),
//! the same server again on a new connection (a kept one the server had closed), or the
//! end, with what the front end must answer.

use super::{connect_failed, decide, dropped, settled, take_now, take_slot, Front, RequestCtx};
use super::{Heard, FAILED_STATUS};
use crate::routing::{ms_at, now_ms, Decision, Reject};
use crate::wire::http1::head::Refusal;

/// Why a try failed whose new connection the server closed or reset before any byte of
/// its answer ([`Failure::Dropped`]).
pub const DROPPED: &str = "the server closed the connection before it answered";

/// Bound on tries of one request (pingora-proxy's; tether's `max_attempts` is lower).
const MAX_TRIES: usize = 16;

/// Why a request's body stopped being read.
#[derive(Debug)]
pub enum Stop {
    /// The body's coding was broken: the refusal's status, and the connection closes.
    Refused(Refusal),
    /// Slower than `request_body_min_rate`, or a read waited `request_body_timeout`: 408.
    TooSlow,
    /// The client closed or failed.
    Closed,
}

/// How a try ended, when it did not relay an answer.
#[derive(Debug)]
pub enum Failure {
    /// No connection to the server.
    Connect(String),
    /// No connection to the server within `connect_timeout` (504 when it ends the request,
    /// as nginx and HAProxy say, and as Pingora's proxy path answers).
    ConnectTimedOut(String),
    /// A kept connection was closed by the server before it answered: nothing of the
    /// request can have been served; it may go again on a new connection.
    Stale,
    /// A new connection was closed or reset by the server before any byte of its answer
    /// (a server that crashed or was killed while it had the request): an idempotent
    /// request goes to another server, as nginx's `proxy_next_upstream error` and
    /// mod_jk's recovery send it, and the server is marked down as after a failed connect.
    Dropped(&'static str),
    /// The server answered a `fail_on_status` or `retry_on` status.
    Status,
    /// The server's answer (this status) is replaced by tether's page for it
    /// (`replace_server_errors`).
    Replaced(u16),
    /// No answer head within `read_timeout` (504 when it ends the request).
    Timeout,
    /// An answer head that does not parse, or that ended before it was whole (502 when
    /// it ends the request).
    Junk(&'static str),
    /// The server failed: answer the client with this status (502, 504).
    Upstream(u16, &'static str),
    /// The client went away (499 while the server worked) or did not read in time, after
    /// the answer began (its status).
    Client(u16),
    /// The streamed body stopped: too slow, malformed, or its client gone.
    Body(Stop),
}

impl Failure {
    /// How a try goes on after its server's answer head was `heard` (`status`), for the
    /// front ends that carry out the exchange: `Ok(true)` a final answer to relay,
    /// `Ok(false)` an interim one to relay before the final one is read, else how the try
    /// ended.
    pub fn after_head(heard: Heard, status: u16) -> Result<bool, Failure> {
        match heard {
            Heard::Final => Ok(true),
            Heard::Interim => Ok(false),
            Heard::Retry => Err(Failure::Status),
            Heard::Replace => Err(Failure::Replaced(status)),
            Heard::Failed => Err(Failure::Upstream(FAILED_STATUS, "fail_on_status")),
            Heard::TooManyInterim => Err(Failure::Upstream(
                502,
                "too many informational (1xx) responses",
            )),
        }
    }

    /// The failure as it ends the request once its body streamed to the server (nothing
    /// is sent again): no kind that another try could mend.
    pub fn unsendable(self) -> Failure {
        match self {
            Failure::Stale | Failure::Dropped(_) => {
                Failure::Upstream(502, "the server closed the connection")
            }
            Failure::Timeout => Failure::Upstream(504, TIMED_OUT),
            Failure::Junk(why) => Failure::Upstream(502, why),
            other => other,
        }
    }
}

/// Why a try failed that got no answer head within `read_timeout`.
pub const TIMED_OUT: &str = "the server did not answer in time";

/// A relayed answer: its status, and whether the client's connection may go on.
pub struct Relayed {
    pub status: u16,
    pub client_keep: bool,
}

/// How the tries ended: an answer relayed, or what the front end answers itself.
pub enum Ended {
    Relayed(Relayed),
    /// tether refused the request (no server, `sticky_force`): 503.
    Refused(Reject),
    /// The servers failed before an answer: the status (502, 504), and why in words.
    Failed(u16, String),
    /// The client went away or did not read in time (the status logged).
    Client(u16),
    /// The server answered this status, which tether answers with its own page.
    Replaced(u16),
    /// The body stopped while it streamed to the server.
    Body(Stop),
}

/// The tries of one request: the front end asks [`Tries::begin`] for each try's server
/// and tells [`Tries::failed`] how a try failed, until one relays an answer or the tries
/// end.
pub struct Tries {
    decision: Decision,
    made: usize,
}

impl Tries {
    /// The routing decision for the request's first try (`ctx` bound to its cluster),
    /// after the fleet's wait when there is one.
    pub async fn first(ctx: &mut RequestCtx, front: &impl Front) -> Tries {
        let first = decide(ctx, front, ms_at(ctx.start));
        let decision = settled(ctx, front, first).await;
        let decision = match take_now(ctx, decision) {
            Ok(decision) => decision,
            Err(full) => take_slot(ctx, front, full).await,
        };
        ctx.count_decision(decision);
        Tries { decision, made: 0 }
    }

    /// The next try begins on the server decided (in `ctx.server`), or the request is
    /// refused.
    pub fn begin(&mut self, ctx: &mut RequestCtx) -> Result<(), Ended> {
        let (server, outcome) = match self.decision {
            Decision::Route { server, outcome } => (server, outcome),
            Decision::Reject(reason) => return Err(Ended::Refused(reason)),
        };
        self.made += 1;
        ctx.begin_try(server, outcome);
        Ok(())
    }

    /// The current try failed: `Ok` when another try is allowed (its server decided),
    /// else how the request ends. `idempotent`: the request may go again after a kept
    /// connection closed under it (RFC 9110 §9.2.2).
    pub async fn failed(
        &mut self,
        ctx: &mut RequestCtx,
        front: &impl Front,
        failure: Failure,
        idempotent: bool,
    ) -> Result<(), Ended> {
        let retry = self.made < MAX_TRIES;
        let timed_out = matches!(failure, Failure::ConnectTimedOut(_));
        match failure {
            Failure::Connect(why) | Failure::ConnectTimedOut(why) => {
                if connect_failed(ctx, &why) && retry {
                    self.decide_again(ctx, front).await;
                    return Ok(());
                }
                Err(Ended::Failed(if timed_out { 504 } else { 502 }, why))
            }
            // The server closed a kept connection: the same server, on a new one (the
            // decision stands).
            Failure::Stale if retry && ctx.resendable(idempotent) => Ok(()),
            Failure::Stale => {
                ctx.upstream_failed = true;
                let why = format!("the server closed a kept connection ({})", address(ctx));
                Err(Ended::Failed(502, why))
            }
            Failure::Dropped(why) if ctx.resendable(idempotent) => {
                if dropped(ctx, why) && retry {
                    self.decide_again(ctx, front).await;
                    return Ok(());
                }
                Err(Ended::Failed(502, format!("{why} ({})", address(ctx))))
            }
            Failure::Dropped(why) => {
                ctx.upstream_failed = true;
                Err(Ended::Failed(502, format!("{why} ({})", address(ctx))))
            }
            Failure::Status if retry => {
                let next = decide(ctx, front, now_ms());
                self.decision = take_slot(ctx, front, next).await;
                ctx.count_decision(self.decision);
                Ok(())
            }
            Failure::Status => Err(Ended::Failed(
                super::FAILED_STATUS,
                "fail_on_status".to_string(),
            )),
            // `retry_on`: response_timeout, junk_response. The server is not marked down
            // (its slowness or one bad answer is not an outage; `outlier` ejects one that
            // keeps failing).
            Failure::Timeout | Failure::Junk(_)
                if retry && self.again(ctx, &failure, idempotent) =>
            {
                self.decide_again(ctx, front).await;
                Ok(())
            }
            Failure::Timeout => {
                ctx.upstream_failed = true;
                Err(Ended::Failed(
                    504,
                    format!("{TIMED_OUT} ({})", address(ctx)),
                ))
            }
            Failure::Junk(why) => {
                ctx.upstream_failed = true;
                Err(Ended::Failed(502, format!("{why} ({})", address(ctx))))
            }
            Failure::Upstream(status, why) => {
                ctx.upstream_failed = true;
                Err(Ended::Failed(status, format!("{why} ({})", address(ctx))))
            }
            Failure::Client(status) => Err(Ended::Client(status)),
            Failure::Replaced(status) => Err(Ended::Replaced(status)),
            Failure::Body(stop) => Err(Ended::Body(stop)),
        }
    }
}

impl Tries {
    /// Does `retry_on` send the request on after `failure` (a timeout or junk)?
    fn again(&self, ctx: &RequestCtx, failure: &Failure, idempotent: bool) -> bool {
        let Some(router) = &ctx.router else {
            return false;
        };
        let on = match failure {
            Failure::Timeout => router.retry.response_timeout,
            Failure::Junk(_) => router.retry.junk_response,
            _ => false,
        };
        on && ctx.resendable(idempotent) && ctx.may_try_again()
    }

    /// The next try's decision, after the fleet's word when it has one, with its slot.
    async fn decide_again(&mut self, ctx: &mut RequestCtx, front: &impl Front) {
        let next = decide(ctx, front, now_ms());
        let next = settled(ctx, front, next).await;
        self.decision = take_slot(ctx, front, next).await;
        ctx.count_decision(self.decision);
    }
}

/// The address of the current try's server, for a failure's words.
fn address(ctx: &RequestCtx) -> String {
    match (&ctx.router, ctx.server) {
        (Some(router), Some(i)) => router.servers()[i].config.address.to_string(),
        _ => "no server".to_string(),
    }
}

/// May a request with this method be sent again (RFC 9110 §9.2.2)?
pub fn idempotent(method: &[u8]) -> bool {
    matches!(
        method,
        b"GET" | b"HEAD" | b"PUT" | b"DELETE" | b"OPTIONS" | b"TRACE"
    )
}
