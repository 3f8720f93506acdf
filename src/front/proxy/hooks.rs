//! `ProxyHttp` for [`TetherProxy`]: Pingora's phases, each handing over to the method of
//! the same job in `proxy.rs`.

use super::{retry_allowed, RequestCtx, TetherProxy};
use async_trait::async_trait;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_core::Result;
use pingora_error::{Error, ErrorType, OrErr, RetryType};
use pingora_http::{RequestHeader, ResponseHeader};
use pingora_proxy::{FailToProxy, ProxyHttp, Session};

#[async_trait]
impl ProxyHttp for TetherProxy {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        RequestCtx::new()
    }

    /// No downstream modules. Pingora's default adds its response-compression module
    /// switched off, which still costs five heap allocations per request (`bench/allocs`);
    /// tether does not compress (the application servers do, or do not).
    fn init_downstream_modules(&self, _modules: &mut pingora_core::modules::http::HttpModules) {}

    async fn early_request_filter(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        self.early_request(session, ctx).await
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        self.request(session, ctx).await
    }

    async fn upstream_peer(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        self.peer(session, ctx).await
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        peer: &HttpPeer,
        ctx: &mut RequestCtx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        let why = crate::pipeline::why_failed(&e, peer);
        if crate::pipeline::connect_failed(ctx, &why) {
            e.set_retry(true);
        }
        e
    }

    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ctx: &mut RequestCtx,
        client_reused: bool,
    ) -> Box<Error> {
        let mut e = e.more_context(format!("Peer: {peer}"));
        // Pingora marks a failure to read the answer's head as one to retry on a reused
        // connection only; on a new one, the server dropped the request (it crashed or was
        // killed while it had it): another server, as tether's own front ends send it.
        let dropped = !client_reused && matches!(e.retry, RetryType::ReusedOnly);
        // `retry_on`'s response_timeout and junk_response, before any byte of an answer
        // went to the client: the next server, this one not marked down.
        let before_answer = session.response_written().is_none();
        let on = ctx.router.as_ref().map(|r| match e.etype() {
            ErrorType::ReadTimedout => r.retry.response_timeout,
            ErrorType::InvalidHTTPHeader | ErrorType::H1Error => r.retry.junk_response,
            _ => false,
        });
        if !retry_allowed(session, ctx) || !before_answer {
            e.set_retry(false);
        } else if dropped {
            let why = crate::pipeline::DROPPED;
            e.set_retry(crate::pipeline::dropped(ctx, why));
            ctx.retry_same = false;
            return e;
        } else if on == Some(true) {
            e.set_retry(ctx.may_try_again());
            ctx.retry_same = false;
            return e;
        } else {
            e.retry.decide_reuse(client_reused);
        }
        // A reused keep-alive connection that the server had closed says nothing about the
        // server's health: retry on the same server. A `fail_on_status` answer does.
        ctx.retry_same = e.retry() && !std::mem::take(&mut ctx.status_failure);
        e
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        self.upstream_request(session, upstream_request, ctx).await
    }

    async fn upstream_response_filter(
        &self,
        session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        self.upstream_response(session, upstream_response, ctx)
            .await
    }

    /// Pingora logs every failed request as an ERROR, with its error's debug dump; tether
    /// logs the ones that are errors itself, in words (`TetherProxy::log`).
    fn suppress_error_log(&self, _session: &Session, _ctx: &RequestCtx, _e: &Error) -> bool {
        true
    }

    /// Each retry is counted (`tether_retries_total`) and a server's being marked down is
    /// logged once; a warning per retried request would repeat that for every request.
    fn suppress_proxy_warn_log(
        &self,
        _session: &Session,
        _ctx: &RequestCtx,
        _e: &Error,
        _context: pingora_proxy::ProxyWarnLogContext,
    ) -> bool {
        true
    }

    async fn request_body_filter(
        &self,
        session: &mut Session,
        body: &mut Option<bytes::Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        if let Some(body) = body {
            count_bytes(ctx, body.len(), true);
        }
        self.body_arrived(session, end_of_stream, ctx)
    }

    fn response_body_filter(
        &self,
        session: &mut Session,
        body: &mut Option<bytes::Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<Option<std::time::Duration>> {
        if let Some(body) = body {
            count_bytes(ctx, body.len(), false);
        }
        super::squeeze::body(body, end_of_stream, ctx)
            .or_err(ErrorType::InternalError, "compressing the answer")?;
        if let Some(body) = body {
            self.sending(session, body.len(), ctx);
        }
        Ok(None)
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
        self.answer_failure(session, e, ctx).await
    }

    async fn response_filter(
        &self,
        session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        self.response(session, upstream_response, ctx).await
    }

    async fn connected_to_upstream(
        &self,
        _session: &mut Session,
        reused: bool,
        _peer: &HttpPeer,
        #[cfg(unix)] _fd: std::os::unix::io::RawFd,
        #[cfg(windows)] _sock: std::os::windows::io::RawSocket,
        _digest: Option<&pingora_core::protocols::Digest>,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        self.connected(reused, ctx);
        Ok(())
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut RequestCtx) {
        self.log(session, e, ctx).await
    }
}

/// Body bytes to (`to_server`) or from the request's server, into its totals: Pingora's
/// connections are not tether's to count, so on this front end the bodies are.
fn count_bytes(ctx: &RequestCtx, n: usize, to_server: bool) {
    if let (Some(router), Some(i)) = (&ctx.router, ctx.server) {
        let bytes = router.servers()[i].live.bytes();
        let counter = match to_server {
            true => &bytes.to_server,
            false => &bytes.from_server,
        };
        counter.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    }
}
