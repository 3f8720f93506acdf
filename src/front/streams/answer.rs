//! tether's own answers ([`Answer`]) on a stream: the head and body
//! `proxy::reply` makes for each (as pingora-proxy's path sends them), less the fields
//! HTTP/2 and HTTP/3 have no place for.

use super::io::{Reset, Respond};
use super::send;
use crate::config::ListenerLimits;
use crate::pipeline::Answer;

/// Sends `answer` on the stream: its status (499 when the client reset the stream first).
pub(super) async fn send<R: Respond>(
    respond: &mut R,
    answer: &Answer<'_>,
    limits: &ListenerLimits,
    listener: &str,
) -> u16 {
    let status = answer.status();
    let Ok(reply) = crate::front::proxy::reply(answer, false) else {
        // A plugin's field that is no field: nothing better to send.
        respond.reset(Reset::Internal);
        return status;
    };
    let (head, body) = reply.into_parts();
    let mut parts = http::response::Parts::from(*head);
    // A stream ends alone: HTTP/2 and HTTP/3 have no `Connection`.
    parts.headers.remove(http::header::CONNECTION);
    parts.version = R::VERSION;
    let end = body.is_empty();
    match respond.send_response(http::Response::from_parts(parts, ()), end) {
        Ok(mut stream) if !end => match send::data(&mut stream, body, true, limits, listener).await
        {
            Ok(()) | Err(send::Stopped::TooSlow) => status,
            Err(send::Stopped::Gone) => 499,
        },
        Ok(_) => status,
        Err(_) => 499,
    }
}
