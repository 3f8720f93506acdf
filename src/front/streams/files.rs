//! A `serve:` request on a stream: the file answer's head (as pingora-proxy's path
//! builds it, less what HTTP/2 and HTTP/3 have no place for), then the body in chunks within the
//! client's flow-control window.

use super::answer;
use super::io::{Reset, Respond, SendBody};
use super::send;
use crate::config::{Files, ListenerLimits};
use crate::pipeline::files::{self, Outcome, CHUNK};
use crate::pipeline::{Answer, ErrorPages3};
use crate::routing::Fields;
use bytes::Bytes;
use std::sync::Arc;

/// Answers a request (`method`, `origin`, `fields`) from `files`: the status (499 when the
/// client reset the stream first).
pub(super) async fn serve<R: Respond>(
    respond: &mut R,
    files: &Arc<Files>,
    (method, origin, fields): (&[u8], &[u8], &impl Fields),
    pages: ErrorPages3<'_>,
    limits: &ListenerLimits,
    listener: &str,
) -> u16 {
    let mut served = match files::look_up(files, method, origin, fields).await {
        Outcome::File(served) => served,
        Outcome::Moved(to) => {
            let moved = Answer::Redirect {
                status: 301,
                to: &to,
            };
            return answer::send(respond, &moved, limits, listener).await;
        }
        Outcome::Refused(refused) => {
            let refused = refused.paged(pages);
            return answer::send(respond, &refused, limits, listener).await;
        }
    };
    let status = served.status;
    let Ok(head) = crate::front::proxy::file_head(&served) else {
        respond.reset(Reset::Internal);
        return status;
    };
    let mut parts = http::response::Parts::from(head);
    parts.version = R::VERSION;
    let body = served.body.take();
    let end = body.is_none();
    let mut stream = match respond.send_response(http::Response::from_parts(parts, ()), end) {
        Ok(stream) => stream,
        Err(_) => return 499,
    };
    let Some(mut body) = body else {
        return status;
    };
    while !body.is_done() {
        let mut chunk = Vec::with_capacity(CHUNK);
        if body.read(&mut chunk, CHUNK).await.is_err() {
            stream.reset(Reset::Internal);
            return status;
        }
        let last = body.is_done();
        match send::data(&mut stream, Bytes::from(chunk), last, limits, listener).await {
            Ok(()) => {}
            Err(send::Stopped::TooSlow) => return status,
            Err(send::Stopped::Gone) => return 499,
        }
    }
    status
}
