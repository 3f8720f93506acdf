//! A `serve:` request on Pingora's proxy: the file answer's head as a `ResponseHeader`
//! (which the HTTP/2 front end sends too), then the body in chunks.

use super::request::Req;
use super::respond;
use crate::config::Files;
use crate::pipeline::files::{self, Outcome, Served, CHUNK};
use crate::pipeline::{Answer, RequestCtx};
use crate::state::snapshot::Snapshot;
use bytes::Bytes;
use pingora_core::Result;
use pingora_error::{ErrorType, OrErr};
use pingora_http::ResponseHeader;
use pingora_proxy::Session;
use std::sync::Arc;

/// The head of `served`.
pub fn head(served: &Served<'_>) -> Result<ResponseHeader> {
    let mut head = ResponseHeader::build(served.status, Some(10))?;
    let mut failed = None;
    served.fields(|name, value| {
        if let Err(e) = head.append_header(name, value) {
            failed = Some(e);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    if let Some(length) = served.length {
        head.insert_header(http::header::CONTENT_LENGTH, length)?;
    }
    Ok(head)
}

/// Answers the request from `files`: the status sent.
pub async fn serve(
    session: &mut Session,
    files: &Arc<Files>,
    (snapshot, listener, ctx): (&Snapshot, usize, &RequestCtx),
) -> Result<u16> {
    let found = {
        let front = Req::of(session);
        let method = session.req_header().method.as_str().as_bytes();
        let origin = crate::pipeline::Front::origin(&front);
        files::look_up(files, method, origin, &front).await
    };
    let mut served = match found {
        Outcome::File(served) => served,
        Outcome::Moved(to) => {
            let answer = Answer::Redirect {
                status: 301,
                to: &to,
            };
            respond::answer(session, &answer, false).await?;
            return Ok(301);
        }
        Outcome::Refused(answer) => {
            let answer = answer.paged(crate::pipeline::pages(snapshot, listener, ctx));
            respond::answer(session, &answer, false).await?;
            return Ok(answer.status());
        }
    };
    let status = served.status;
    let body = served.body.take();
    session
        .write_response_header(Box::new(head(&served)?), body.is_none())
        .await?;
    if let Some(mut body) = body {
        while !body.is_done() {
            let mut chunk = Vec::with_capacity(CHUNK);
            body.read(&mut chunk, CHUNK)
                .await
                .or_err(ErrorType::ReadError, "reading a served file")?;
            session
                .write_response_body(Some(Bytes::from(chunk)), body.is_done())
                .await?;
        }
    }
    Ok(status)
}
