//! Request body buffering (nginx `proxy_request_buffering`): a body up to the listener's
//! `request_buffer` is read whole before a server is connected, so a client sending one
//! byte a second holds a tether task, not an application server's thread.
//!
//! Pingora sends what its retry buffer holds to the server first, so the buffered body
//! goes upstream as it is, and a retry can send it again. Bodies of unknown length
//! (chunked) or larger than the buffer stream as before, each read bounded by
//! `request_body_timeout`.

use crate::config::ListenerLimits;
use pingora_core::Result;
use pingora_proxy::Session;

/// Reads a small body whole; false when `request_body_timeout` passed first (answer 408).
pub async fn buffer(session: &mut Session, limits: &ListenerLimits) -> Result<bool> {
    if limits.request_buffer == 0 {
        return Ok(true);
    }
    let length = session
        .req_header()
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = session
        .req_header()
        .headers
        .contains_key(http::header::TRANSFER_ENCODING);
    let small = !chunked && matches!(length, Some(n) if n > 0 && n <= limits.request_buffer);
    if !small || session.is_body_done() {
        return Ok(true);
    }
    session.enable_retry_buffering();
    let read_all = async {
        while session.read_request_body().await?.is_some() {}
        Ok::<(), Box<pingora_error::Error>>(())
    };
    match tokio::time::timeout(limits.request_body_timeout, read_all).await {
        Ok(result) => result.map(|()| true),
        Err(_) => Ok(false),
    }
}
