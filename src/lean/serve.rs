//! One HTTP/1 request on the lean path: the `TetherProxy` phases in pingora-proxy's order
//! (`early_request_filter`, `request_filter`, then tries of `upstream_peer` and the
//! exchange until one succeeds or may not be retried, `fail_to_proxy`, `logging`).

use super::eligible;
use crate::listener::HeadLimited;
use crate::proxy::{RequestCtx, TetherProxy};
use crate::snapshot::SharedSnapshot;
use bytes::BytesMut;
use log::{debug, error};
use pingora_core::connectors::http::v1::Connector;
use pingora_core::connectors::ConnectorOptions;
use pingora_core::modules::http::HttpModules;
use pingora_core::protocols::http::ServerSession;
use pingora_core::protocols::Stream;
use pingora_error::{Error, ErrorType};
use pingora_prometheus::prometheus::IntCounter;
use pingora_proxy::{ProxyHttp, Session};
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

/// pingora-proxy's bound on tries of one request (tether's `max_attempts` is lower).
const MAX_TRIES: usize = 16;

/// The lean path of one listener.
pub struct Lean {
    pub(super) tether: TetherProxy,
    pub(super) connector: Connector,
    snapshot: SharedSnapshot,
    listener: usize,
    modules: HttpModules,
    stopping: AtomicBool,
    shutdown: Notify,
    /// Requests served here, and handed over.
    served: (IntCounter, IntCounter),
}

/// What became of a request.
pub enum Served {
    /// Answered: the connection goes on with the stream and the bytes read past the
    /// request (pipelining), or closes (`None`).
    Done(Option<(Stream, Option<BytesMut>)>),
    /// Not one for the lean path: a session that reads the same request again from the
    /// bytes already read, for pingora-proxy.
    Handover(Box<ServerSession>),
}

impl Lean {
    pub fn new(
        tether: TetherProxy,
        options: ConnectorOptions,
        snapshot: SharedSnapshot,
        listener: usize,
        name: &str,
    ) -> Self {
        Lean {
            tether,
            connector: Connector::new(Some(options)),
            snapshot,
            listener,
            modules: HttpModules::new(),
            stopping: AtomicBool::new(false),
            shutdown: Notify::new(),
            served: crate::metrics::lean_counters(name),
        }
    }

    /// The server is stopping: idle connections close, answered ones are not kept.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.shutdown.notify_waiters();
    }

    /// Reads one request from `stream` (after `prefix`, bytes read past the previous one)
    /// and serves it, or hands it over.
    pub async fn serve(&self, stream: Stream, prefix: Option<BytesMut>, stopping: bool) -> Served {
        let mut session = Session::new_h1_with_modules(stream, &self.modules);
        if let Some(p) = &prefix {
            session.as_downstream_mut().set_pipelined_prefix(p.clone());
        }
        let stop = self.shutdown.notified();
        tokio::pin!(stop);
        stop.as_mut().enable();
        if self.stopping.load(Ordering::Acquire) {
            return Served::Done(None);
        }
        let read = tokio::select! {
            biased;
            r = session.as_downstream_mut().read_request() => r,
            () = &mut stop => return Served::Done(None),
        };
        match read {
            Ok(true) => {}
            Ok(false) => return Served::Done(None),
            Err(mut e) => {
                e.as_down();
                if matches!(e.etype, ErrorType::InvalidHTTPHeader) {
                    debug!("Fail to proxy: {e}, downstream session type: HTTP/1");
                    if let Err(e) = session.as_downstream_mut().respond_error(400).await {
                        error!("failed to send error response to downstream: {e}");
                    }
                } else {
                    error!("Fail to proxy: {e}, downstream session type: HTTP/1");
                }
                session.as_downstream_mut().shutdown().await;
                return Served::Done(None);
            }
        }
        let request_buffer = self.snapshot.load().limits[self.listener].request_buffer;
        let Some(take) = eligible::takes(session.req_header(), request_buffer) else {
            self.served.1.inc();
            return Served::Handover(Box::new(handover(session, prefix)));
        };
        self.served.0.inc();
        if stopping || self.stopping.load(Ordering::Acquire) {
            session.set_keepalive(None);
        }
        Served::Done(self.process(session, take).await)
    }

    async fn process(
        &self,
        mut session: Session,
        take: eligible::Take,
    ) -> Option<(Stream, Option<BytesMut>)> {
        let t = &self.tether;
        let mut ctx = RequestCtx::new();
        if let Err(e) = t.early_request(&mut session, &mut ctx).await {
            return self
                .failed(session, ctx, e, "Fail to early filter request:")
                .await;
        }
        match t.request(&mut session, &mut ctx).await {
            Ok(true) => {
                t.log(&mut session, &mut ctx).await;
                return finish(session).await;
            }
            Ok(false) => {}
            Err(e) => {
                return self
                    .failed(session, ctx, e, "Fail to filter request:")
                    .await
            }
        }
        let mut tries = 0;
        let mut reuse = false;
        let mut failure: Option<Box<Error>> = None;
        while tries < MAX_TRIES {
            tries += 1;
            let (r, e) = self.attempt(&mut session, &mut ctx, take).await;
            reuse = r;
            let retry = e.as_ref().is_some_and(|e| e.retry());
            failure = e;
            if !retry {
                break;
            }
        }
        if let Some(e) = &failure {
            let res = t.answer_failure(&mut session, e, &mut ctx).await;
            if !t.suppress_error_log(&session, &ctx, e) {
                error!(
                    "Fail to proxy: {e}, status: {}, tries: {tries}, retry: false, {}",
                    res.error_code,
                    t.request_summary(&session, &ctx),
                );
            }
        }
        t.log(&mut session, &mut ctx).await;
        if reuse {
            finish(session).await
        } else {
            None
        }
    }

    /// A phase failed: answer (`fail_to_proxy`), log, and close.
    async fn failed(
        &self,
        mut session: Session,
        mut ctx: RequestCtx,
        e: Box<Error>,
        context: &str,
    ) -> Option<(Stream, Option<BytesMut>)> {
        let t = &self.tether;
        let res = t.answer_failure(&mut session, &e, &mut ctx).await;
        if !t.suppress_error_log(&session, &ctx, &e) {
            error!(
                "{context} {e}, status: {}, {}",
                res.error_code,
                t.request_summary(&session, &ctx)
            );
        }
        t.log(&mut session, &mut ctx).await;
        if res.can_reuse_downstream {
            finish(session).await
        } else {
            None
        }
    }
}

/// Ends the response; the stream (and any bytes read past the request) when the
/// connection may carry another request.
async fn finish(session: Session) -> Option<(Stream, Option<BytesMut>)> {
    let reusable = session.downstream_session.finish().await.ok().flatten()?;
    Some(reusable.into_parts())
}

/// A new session on the same connection that reads, first, every byte this request's head
/// read took from it (and the bytes left over from the request before).
fn handover(session: Session, prefix: Option<BytesMut>) -> ServerSession {
    let ServerSession::H1(h1) = *session.downstream_session else {
        unreachable!("the lean path reads HTTP/1 only");
    };
    let mut stream = h1
        .into_inner()
        .into_any()
        .downcast::<HeadLimited>()
        .expect("a lean listener's connections are HeadLimited");
    let reads = stream.stop_recording();
    let replay = match prefix {
        Some(mut p) => {
            p.extend_from_slice(&reads);
            p
        }
        None => reads,
    };
    let mut session = ServerSession::new_http1(stream);
    if !replay.is_empty() {
        session.set_pipelined_prefix(replay);
    }
    session
}
