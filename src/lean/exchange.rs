//! One try of a lean request: a connection from the pool, the head and the (buffered)
//! body written, the answer read and relayed as it comes. Sequential: the request is whole
//! before the answer is read, so no second task or channel is needed.

use super::{eligible, Lean};
use crate::proxy::{RequestCtx, TetherProxy};
use pingora_core::protocols::http::v1::client::HttpSession;
use pingora_core::protocols::http::HttpTask;
use pingora_core::upstreams::peer::Peer;
use pingora_core::Result;
use pingora_error::{Error, ErrorType};
use pingora_proxy::{ProxyHttp, Session};

impl Lean {
    /// One try: `(client connection reusable, error)`, as pingora-proxy's
    /// `proxy_to_upstream` returns it (the error already through `fail_to_connect` or
    /// `error_while_proxy`, which decide whether it may be retried).
    pub(super) async fn attempt(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
        take: eligible::Take,
    ) -> (bool, Option<Box<Error>>) {
        let t = &self.tether;
        let peer = match t.peer(session, ctx).await {
            Ok(p) => p,
            Err(e) => return (false, Some(e)),
        };
        let (mut up, reused) = match self.connector.get_http_session(&*peer).await {
            Ok(c) => c,
            Err(mut e) => {
                e.as_up();
                let e = t.fail_to_connect(session, &peer, ctx, e);
                return (false, Some(e.into_up()));
            }
        };
        up.read_timeout = peer.options.read_timeout;
        up.write_timeout = peer.options.write_timeout;
        t.connected(reused, ctx);
        let (done, up_reusable, error) = exchange(t, session, &mut up, ctx, take).await;
        if up_reusable {
            self.connector
                .release_http_session(up, &*peer, peer.idle_timeout())
                .await;
        }
        let error = error.map(|e| t.error_while_proxy(&peer, session, e, ctx, reused));
        (done, error)
    }
}

/// `(client connection reusable, server connection reusable, error)`.
async fn exchange(
    t: &TetherProxy,
    session: &mut Session,
    up: &mut HttpSession,
    ctx: &mut RequestCtx,
    take: eligible::Take,
) -> (bool, bool, Option<Box<Error>>) {
    let mut req = match eligible::upstream_head(session.req_header(), take) {
        Ok(req) => req,
        Err(e) => return (false, true, Some(e)),
    };
    if let Err(e) = t.upstream_request(session, &mut req, ctx).await {
        return (false, true, Some(e));
    }
    if let Err(e) = up.write_request_header(Box::new(req)).await {
        return (false, false, Some(e.into_up()));
    }
    if let Err(e) = send_body(session, up).await {
        return (false, false, Some(e));
    }
    match relay(t, session, up, ctx).await {
        Ok(()) => (true, true, None),
        Err(e) => (false, false, Some(e)),
    }
}

/// The request body: what the retry buffer holds (all of it, for the requests the lean
/// path takes), then anything still unread.
async fn send_body(session: &mut Session, up: &mut HttpSession) -> Result<()> {
    if let Some(buffered) = session.as_downstream().get_retry_buffer() {
        up.write_body(&buffered).await.map_err(|e| e.into_up())?;
    }
    while !session.is_body_done() {
        match session
            .read_request_body()
            .await
            .map_err(|e| e.into_down())?
        {
            Some(chunk) => {
                up.write_body(&chunk).await.map_err(|e| e.into_up())?;
            }
            None => break,
        }
    }
    up.finish_body().await.map_err(|e| e.into_up())?;
    Ok(())
}

/// The answer, header by header and chunk by chunk, through tether's response phases.
async fn relay(
    t: &TetherProxy,
    session: &mut Session,
    up: &mut HttpSession,
    ctx: &mut RequestCtx,
) -> Result<()> {
    loop {
        match up.read_response_task().await.map_err(|e| e.into_up())? {
            HttpTask::Header(mut resp, end) => {
                if resp.status == http::StatusCode::SWITCHING_PROTOCOLS {
                    return Err(Error::explain(
                        ErrorType::InvalidHTTPHeader,
                        "101 to a request that asked for no upgrade",
                    )
                    .into_up());
                }
                t.upstream_response(session, &mut resp, ctx).await?;
                let informational = resp.status.is_informational();
                if !informational && !end {
                    chunk_if_close_delimited(session, &mut resp)?;
                }
                t.response(session, &mut resp, ctx).await?;
                session
                    .write_response_header(resp, end && !informational)
                    .await
                    .map_err(|e| e.into_down())?;
                if end && !informational {
                    break;
                }
            }
            HttpTask::Body(data, end) => {
                if let Some(data) = data {
                    t.sending(session, data.len(), ctx);
                    session
                        .as_downstream_mut()
                        .write_response_body(data, false)
                        .await
                        .map_err(|e| e.into_down())?;
                }
                if end {
                    break;
                }
            }
            HttpTask::Done => break,
            HttpTask::Trailer(_) => {}
            HttpTask::UpgradedBody(..) => {
                return Err(Error::explain(ErrorType::InvalidHTTPHeader, "upgraded body").into_up())
            }
            HttpTask::Failed(e) => return Err(e.into_up()),
        }
    }
    session
        .as_downstream_mut()
        .finish_body()
        .await
        .map_err(|e| e.into_down())
}

/// An answer whose end is the server's close goes to the client chunked, so the client's
/// connection can stay open (what pingora-proxy does).
fn chunk_if_close_delimited(
    session: &Session,
    resp: &mut pingora_http::ResponseHeader,
) -> Result<()> {
    let no_body = session.req_header().method == http::Method::HEAD
        || matches!(resp.status.as_u16(), 204 | 304);
    if no_body
        || resp.headers.contains_key(http::header::TRANSFER_ENCODING)
        || resp.headers.contains_key(http::header::CONTENT_LENGTH)
    {
        return Ok(());
    }
    resp.set_version(http::Version::HTTP_11);
    resp.insert_header(http::header::TRANSFER_ENCODING, "chunked")
}
