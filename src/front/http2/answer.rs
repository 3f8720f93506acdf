//! tether's own answers ([`Answer`]) on an HTTP/2 stream: the head and body
//! `proxy::reply` makes for each (as pingora-proxy's path sends them), less the fields
//! HTTP/2 has no place for.

use super::send;
use crate::config::ListenerLimits;
use crate::pipeline::Answer;
use bytes::Bytes;
use h2::server::SendResponse;

/// Sends `answer` on the stream: its status (499 when the client reset the stream first).
pub(super) async fn send(
    respond: &mut SendResponse<Bytes>,
    answer: &Answer<'_>,
    limits: &ListenerLimits,
    listener: &str,
) -> u16 {
    let status = answer.status();
    let Ok(reply) = crate::front::proxy::reply(answer, false) else {
        // A plugin's field that is no field: nothing better to send.
        respond.send_reset(h2::Reason::INTERNAL_ERROR);
        return status;
    };
    let (head, body) = reply.into_parts();
    let mut parts = http::response::Parts::from(*head);
    // A stream ends alone: HTTP/2 has no `Connection`.
    parts.headers.remove(http::header::CONNECTION);
    parts.version = http::Version::HTTP_2;
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
