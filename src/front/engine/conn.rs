//! One client connection on tether's HTTP/1 engine: its stream and the buffers allocated
//! once for it (the read buffer, the head's index, the write buffer, the server's read
//! buffer and head index), reused by every request it carries.

use crate::config::ListenerLimits;
pub use crate::pipeline::upstream::write_all;
use crate::wire::http1::head::RequestHead;
use crate::wire::http1::response::ResponseHead;
use pingora_core::protocols::tls::SslDigest;
use pingora_core::protocols::Stream;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::AsyncReadExt;

/// First size of a read buffer; it grows (to the head limit, plus the body kept for a
/// retry) only for the requests that need it.
const FIRST_READ: usize = 4096;

/// Bytes a connection that gave its buffers back reads its next request's start into, on
/// the stack of its wait's poll (not in its task): a first read's worth, copied into the
/// buffers taken again.
pub const IDLE_READ: usize = FIRST_READ;

/// A connection that gave its buffers back ([`Conn::shed`]) and waits for its next request
/// (jemalloc's 80-byte class, against the whole record's 320).
pub struct IdleConn {
    pub(super) stream: Stream,
    peer: Option<SocketAddr>,
    local: Option<SocketAddr>,
}

impl IdleConn {
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The stream alone (the connection is parked, or ends).
    pub fn into_stream(self) -> Stream {
        self.stream
    }

    /// The whole record again, its buffers taken, with `first`, the next request's first
    /// bytes.
    pub fn wake(self, first: &[u8]) -> Box<Conn> {
        let IdleConn {
            stream,
            peer,
            local,
        } = self;
        Conn::starting_with(stream, (peer, local), first)
    }
}

pub struct Conn {
    pub stream: Stream,
    /// Bytes read from the client: the current request from the start, and what came
    /// after it (pipelined requests) up to `end`.
    pub buf: Vec<u8>,
    pub end: usize,
    pub head: RequestHead,
    /// What is written next: the upstream head, or the answer's head.
    pub out: Vec<u8>,
    /// Bytes read from the server.
    pub up_buf: Vec<u8>,
    pub up_head: ResponseHead,
    /// The client's address and port (a PROXY header's, when the listener takes one).
    pub peer: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    /// Keeps the record out of jemalloc's 256-byte class, which tokio's I/O registration
    /// of every connection is in: records given back by idle connections then free whole
    /// pages, not holes between registrations that stay.
    _class: [u8; 8],
}

impl Conn {
    /// A new connection's record: `addresses`, the client's and the local one.
    pub fn new(
        stream: Stream,
        (peer, local): (Option<SocketAddr>, Option<SocketAddr>),
    ) -> Box<Conn> {
        Box::new(Conn {
            stream,
            buf: vec![0; FIRST_READ],
            end: 0,
            head: RequestHead::new(),
            out: Vec::with_capacity(FIRST_READ),
            up_buf: vec![0; FIRST_READ],
            up_head: ResponseHead::new(),
            peer,
            local,
            _class: [0; 8],
        })
    }

    /// The record of a connection whose next request's first bytes, `first`, were read
    /// while it waited without one.
    pub fn starting_with(
        stream: Stream,
        addresses: (Option<SocketAddr>, Option<SocketAddr>),
        first: &[u8],
    ) -> Box<Conn> {
        let mut c = Conn::new(stream, addresses);
        if c.buf.len() < first.len() {
            c.buf.resize(first.len(), 0);
        }
        c.buf[..first.len()].copy_from_slice(first);
        c.end = first.len();
        c
    }

    /// The TLS connection's facts (`None` on plain TCP): the stream's own, not a copy here
    /// (the record stays in jemalloc's 320-byte class).
    pub fn tls(&self) -> Option<Arc<SslDigest>> {
        self.stream.get_ssl_digest()
    }

    /// Gives the buffers and this record back (a connection waiting for its next
    /// request): what is left is the stream and the addresses, as nginx frees a waiting
    /// connection's buffers.
    pub fn shed(self: Box<Conn>) -> Box<IdleConn> {
        debug_assert_eq!(self.end, 0);
        let Conn {
            stream,
            peer,
            local,
            ..
        } = *self;
        Box::new(IdleConn {
            stream,
            peer,
            local,
        })
    }

    /// Reads more of the client's bytes after `end`, growing the buffer up to `limit`:
    /// the bytes read, 0 at the client's end (or when the buffer may not grow).
    pub async fn read_more(&mut self, limit: usize) -> std::io::Result<usize> {
        if self.end == self.buf.len() {
            if self.buf.len() >= limit {
                return Ok(0);
            }
            let len = (self.buf.len() * 2).clamp(FIRST_READ, limit);
            self.buf.resize(len, 0);
        }
        let end = self.end;
        let n = self.stream.read(&mut self.buf[end..]).await?;
        self.end += n;
        Ok(n)
    }

    /// Moves the bytes after `used` (a pipelined request) to the buffer's start.
    pub fn consume(&mut self, used: usize) {
        self.buf.copy_within(used..self.end, 0);
        self.end -= used;
    }

    /// Writes `out` to the client, at the listener's send rate (`send_min_rate`).
    pub async fn write_out(
        &mut self,
        limits: &ListenerLimits,
        listener: &str,
    ) -> std::io::Result<()> {
        to_client(&mut self.stream, &self.out, limits, listener).await
    }
}

/// Writes `bytes` to the client within what the send rate allows for them; a client too
/// slow to read is counted and its connection reset when it closes (as `proxy.rs` does:
/// or the kernel keeps sending it what it queued).
pub async fn to_client(
    stream: &mut Stream,
    bytes: &[u8],
    limits: &ListenerLimits,
    listener: &str,
) -> std::io::Result<()> {
    let r = write_all(
        stream,
        bytes,
        crate::front::proxy::write_timeout(limits, bytes.len()),
    )
    .await;
    if r.as_ref()
        .is_err_and(|e| e.kind() == std::io::ErrorKind::TimedOut)
    {
        crate::metrics::client_closed(listener, "send_timeout");
        crate::front::head_limit::reset_on_close();
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_keep_their_allocation_classes() {
        // jemalloc's 80-byte class for a waiting connection; its 320-byte class for a busy
        // one, out of the 256-byte class where tokio's I/O registrations are.
        let (idle, busy) = (std::mem::size_of::<IdleConn>(), std::mem::size_of::<Conn>());
        assert!(idle <= 80, "IdleConn: {idle} bytes");
        assert!((257..=320).contains(&busy), "Conn: {busy} bytes");
    }
}
