//! Request body buffering (nginx `proxy_request_buffering`) before a server is connected:
//! a body up to the listener's `request_buffer` is read whole; of a larger or chunked one,
//! the first `request_buffer` bytes are (at most [`H1_MOST`] or [`H2_MOST`]), and the rest
//! streams. So a client sending one byte a second holds a tether task, not an application
//! server's thread; and the reads are bounded by the body's minimum rate (`min_rate.rs`),
//! so it does not hold the task for long either.
//!
//! A client that sent `Expect: 100-continue` gets `100 Continue` from tether first.
//!
//! Pingora keeps what is read here in its retry buffer (64 KiB) and sends that to the
//! server first; a retry can send it again. The buffer drops everything once one more read
//! would overflow it, so the reads here never may: on HTTP/1 the connection's reads are
//! capped at what the target still lacks (`head_limit::cap_reads`); an HTTP/2 read is one
//! DATA frame (16 KiB at most, the frame size tether's HTTP/2 allows).

use super::min_rate;
use crate::config::ListenerLimits;
use pingora_core::Result;
use pingora_error::ErrorType;
use pingora_proxy::Session;
use std::time::Instant;

/// The most of a large or chunked HTTP/1 body read before connecting: the rest of the
/// 64 KiB retry buffer is room for a chunked body's last read.
pub const H1_MOST: usize = 60 * 1024;
/// The same on HTTP/2: one more 16 KiB frame still fits the retry buffer.
pub const H2_MOST: usize = 48 * 1024;

/// What the read before connecting found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buffered {
    /// The body, or its first part, is here (or there was nothing to wait for).
    Ready,
    /// The body fell below the minimum rate, or a read waited `request_body_timeout`.
    TooSlow,
    /// Pingora could not keep what was read (more than 64 KiB came with the head):
    /// nothing can be sent upstream without losing bytes.
    Overflow,
}

/// `Expect: 100-continue` (RFC 9110 §10.1.1), as tether's engine reads it too.
fn expects_continue(req: &pingora_http::RequestHeader) -> bool {
    let values = req.headers.get_all(http::header::EXPECT);
    crate::wire::http1::framing::expects_continue(values.iter().map(|v| v.as_bytes()))
}

/// Reads the start of the body before a server is connected; `start` is when the head
/// was read.
pub async fn buffer(
    session: &mut Session,
    limits: &ListenerLimits,
    start: Instant,
) -> Result<Buffered> {
    if limits.request_buffer == 0 {
        return Ok(Buffered::Ready);
    }
    let req = session.req_header();
    let length = req
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = req.headers.contains_key(http::header::TRANSFER_ENCODING);
    let http2 = session.as_downstream().is_http2();
    // An HTTP/1 request without a body is left alone: asking Pingora whether its body is
    // done would set up its body reader now, before a `101 Switching Protocols`, and the
    // upgraded connection's first bytes could then be taken for the end of the request.
    if !http2 && !chunked && length.unwrap_or(0) == 0 {
        return Ok(Buffered::Ready);
    }
    if session.is_body_done() {
        return Ok(Buffered::Ready);
    }
    let target = match length {
        Some(n) if !chunked && n <= limits.request_buffer => n,
        _ => limits
            .request_buffer
            .min(if http2 { H2_MOST } else { H1_MOST }),
    };
    if !http2 && expects_continue(session.req_header()) {
        // The client waits for this before it sends the body, and the body is read here,
        // before any server could answer it (nginx does the same). The server is not
        // asked again: the body comes without waiting.
        let go_on = pingora_http::ResponseHeader::build(100, Some(0))?;
        session
            .write_response_header(Box::new(go_on), false)
            .await?;
        session
            .req_header_mut()
            .remove_header(&http::header::EXPECT);
    }
    session.enable_retry_buffering();
    let outcome = loop {
        let read = session.as_downstream().body_bytes_read();
        if read >= target || session.is_body_done() {
            break Buffered::Ready;
        }
        let waited = crate::front::head_limit::client_wait().unwrap_or_else(|| start.elapsed());
        let Some(wait) = min_rate::body_time_left(limits, waited, read as u64) else {
            break Buffered::TooSlow;
        };
        if !http2 {
            crate::front::head_limit::cap_reads(Some(target - read));
        }
        match tokio::time::timeout(wait, session.read_request_body()).await {
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) => break Buffered::Ready,
            Ok(Err(e)) if matches!(e.etype(), ErrorType::ReadTimedout) => break Buffered::TooSlow,
            Ok(Err(e)) => {
                crate::front::head_limit::cap_reads(None);
                return Err(e);
            }
            Err(_) => break Buffered::TooSlow,
        }
    };
    crate::front::head_limit::cap_reads(None);
    if outcome == Buffered::Ready && session.as_ref().retry_buffer_truncated() {
        return Ok(Buffered::Overflow);
    }
    Ok(outcome)
}
