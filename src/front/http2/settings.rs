//! The HTTP/2 settings and abuse bounds of a listener's connections: streams at once, the
//! decoded header list (the listener's `max_request_head`, so an HPACK bomb or a flood of
//! CONTINUATION frames is refused as HTTP/1's oversized head is), streams reset before
//! they were served (rapid reset), and what is buffered for a client that does not read.

use crate::config::ListenerLimits;
use h2::server::Builder;

/// Streams a client may have open at once (Pingora's, nginx's and HAProxy's default).
pub const MAX_STREAMS: u32 = 100;

/// Streams the client may reset before tether took them; one more ends the connection
/// with `ENHANCE_YOUR_CALM` (the `h2` crate's default, its answer to rapid reset).
const PENDING_RESETS: usize = 20;

/// Bytes buffered per stream for a client that does not read (the `h2` crate's default
/// is 400 KiB): tether waits for the client's window instead.
const SEND_BUFFER: usize = 64 * 1024;

/// The server side of a connection, bounded by the listener's `limits`.
pub fn builder(limits: &ListenerLimits) -> Builder {
    let mut b = Builder::new();
    b.max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(u32::try_from(limits.max_request_head).unwrap_or(u32::MAX))
        .max_pending_accept_reset_streams(PENDING_RESETS)
        .max_send_buffer_size(SEND_BUFFER)
        // WebSockets over HTTP/2 (RFC 8441), which browsers use when it is offered.
        .enable_connect_protocol();
    b
}

/// Streams a client may reset after tether took them (their servers asked, then the
/// answers abandoned) before the connection is ended as a rapid-reset attack: past this
/// many, and when they are more than half of its streams.
pub const SERVED_RESETS: u64 = 2 * MAX_STREAMS as u64;
