//! A request's body on tether's engine: the part read before a server is chosen (all of a
//! body up to the listener's `request_buffer`, the first `request_buffer` bytes of a larger
//! or chunked one, at most 60 KiB as on pingora-proxy's path), which goes with the head
//! and again on a retry; then the rest, streamed to the server as it comes, at the
//! listener's body rate, with no retry once it began.
//!
//! A body of known length goes as the client sent it, each read written from the read
//! buffer. A chunked body is read strictly (`http1::chunked`) and sent in chunks tether
//! frames itself, one per read: no chunk size, extension or trailer of the client's
//! reaches the server, so a server that reads a size or an extension differently (a
//! 32-bit size, a quoted `;`) cannot be made to frame the stream otherwise than tether.

use super::conn::{write_all, Conn};
use crate::config::ListenerLimits;
use crate::front::proxy;
use crate::pipeline::Stop;
use crate::wire::http1::chunked::{Decoder, Event};
use crate::wire::http1::framing::Body;
use crate::wire::http1::head::Refusal;
use pingora_core::protocols::Stream;
use std::io::ErrorKind;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// Largest read of a streamed body.
const STREAM_READ: usize = 64 * 1024;

/// A request body being read and sent.
pub struct Upload {
    pub body: Body,
    /// Where the body starts in the connection's read buffer (the head's length).
    start: usize,
    /// The end of the body's bytes in the read buffer: the first part, before it streams;
    /// `start` once it has.
    end: usize,
    /// Bytes of a `Content-Length` body not read yet.
    left: u64,
    /// Body bytes read from the client, framing included (for the minimum rate).
    received: u64,
    decoder: Decoder,
    done: bool,
    streamed: bool,
    /// Data bytes of a chunked body so far, and their bound (`max_request_body`; 0: none).
    data: u64,
    limit: u64,
}

/// A chunked body that grew past `max_request_body`.
const TOO_LARGE: Refusal = Refusal {
    status: 413,
    why: crate::pipeline::TOO_LARGE,
};

/// What [`Upload::stream`] ended with.
pub enum Sent {
    /// The whole body went to the server.
    Done,
    /// The server spoke first (its bytes are in the server's read buffer: a whole
    /// informational head, after which the body may go on, or the start of its answer),
    /// or it stopped reading. What is left of the body is sent only after an informational
    /// head; else the client's connection closes after the answer.
    Answered,
}

impl Upload {
    /// The body framed as `body`, after a head of `start` bytes.
    pub fn new(body: Body, start: usize) -> Self {
        Upload {
            body,
            start,
            end: start,
            left: match body {
                Body::Length(n) => n,
                _ => 0,
            },
            received: 0,
            decoder: Decoder::default(),
            done: body == Body::Empty || body == Body::Length(0),
            streamed: false,
            data: 0,
            limit: 0,
        }
    }

    /// Bounds the body at `limit` bytes (0: none), once the route that sets it is known: a
    /// `Content-Length` body was measured against it already (`pipeline::admit`); a chunked
    /// one is counted as it is decoded, what was read so far included.
    pub fn bound(&mut self, limit: u64) -> Result<(), Refusal> {
        self.limit = limit;
        match limit > 0 && self.data > limit {
            true => Err(TOO_LARGE),
            false => Ok(()),
        }
    }

    /// The decoder's next step, its data counted against the bound.
    fn decode(&mut self, input: &[u8]) -> Result<(usize, Event), Refusal> {
        let (used, event) = self.decoder.next(input)?;
        if let Event::Data { start, end } = event {
            self.data += (end - start) as u64;
            if self.limit > 0 && self.data > self.limit {
                return Err(TOO_LARGE);
            }
        }
        Ok((used, event))
    }

    /// The whole body was read (so the connection may carry another request).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Bytes past the first part went to a server: the request cannot be sent again.
    pub fn streamed(&self) -> bool {
        self.streamed
    }

    /// Where the next request starts in the read buffer, once the body is done.
    pub fn used(&self) -> usize {
        self.end
    }

    /// Reads the first part: all of a body up to `request_buffer`, else that much of it.
    /// `since` is when the head was read.
    pub async fn read_first(
        &mut self,
        c: &mut Conn,
        limits: &ListenerLimits,
        since: Instant,
    ) -> Result<(), Stop> {
        let target = match self.body {
            Body::Length(n) if n <= limits.request_buffer as u64 => n as usize,
            // As on pingora-proxy's path, so `request_buffer` means the same on both.
            _ => limits.request_buffer.min(proxy::H1_MOST),
        };
        loop {
            self.take(c).map_err(Stop::Refused)?;
            if self.done || self.end - self.start >= target {
                return Ok(());
            }
            let wait = self.time_left(limits, since)?;
            let read =
                crate::base::poll_time::timeout(wait, c.read_more(self.start + target)).await;
            self.received += bytes_read(read)? as u64;
        }
    }

    /// Counts the bytes read after the body's end so far as body, up to its end.
    fn take(&mut self, c: &Conn) -> Result<(), Refusal> {
        match self.body {
            Body::Empty => {}
            Body::Length(_) => {
                let k = ((c.end - self.end) as u64).min(self.left);
                self.end += k as usize;
                self.left -= k;
                self.done = self.left == 0;
            }
            Body::Chunked => {
                while !self.done && self.end < c.end {
                    let (used, event) = self.decode(&c.buf[self.end..c.end])?;
                    self.end += used;
                    self.done = event == Event::End;
                }
            }
        }
        Ok(())
    }

    /// How long the next read may wait, at the listener's body rate.
    fn time_left(&self, limits: &ListenerLimits, since: Instant) -> Result<Duration, Stop> {
        let waited = crate::front::head_limit::client_wait().unwrap_or_else(|| since.elapsed());
        proxy::body_time_left(limits, waited, self.received).ok_or(Stop::TooSlow)
    }

    /// Appends the first part to `out`, framed for the server (again on each try).
    pub fn first_part(&self, buf: &[u8], out: &mut Vec<u8>) {
        let part = &buf[self.start..self.end];
        match self.body {
            Body::Empty => {}
            Body::Length(_) => out.extend_from_slice(part),
            Body::Chunked => {
                // The same bytes decoded again: they were read without error.
                let mut decoder = Decoder::default();
                let mut rest = part;
                while !rest.is_empty() {
                    let Ok((used, event)) = decoder.next(rest) else {
                        break;
                    };
                    if let Event::Data { start, end } = event {
                        chunk(out, &rest[start..end]);
                    }
                    rest = &rest[used..];
                    if event == Event::End {
                        break;
                    }
                }
                if self.done {
                    out.extend_from_slice(b"0\r\n\r\n");
                }
            }
        }
    }

    /// Streams the rest of the body to `up` (the first part went with the head), reading
    /// it from the client at the listener's body rate and each write to the server within
    /// `write_timeout`. Bytes the server sends meanwhile are read into the connection's
    /// server buffer (`filled` of them): a whole informational head lets the body go on
    /// (the caller relays it), anything else is the answer. The first part's room in the
    /// read buffer takes the rest: the request cannot be sent again from here on.
    pub async fn stream(
        &mut self,
        c: &mut Conn,
        up: &mut Stream,
        filled: &mut usize,
        (limits, write_timeout): (&ListenerLimits, Duration),
        since: Instant,
    ) -> Result<Sent, Stop> {
        let start = self.start;
        self.streamed = true;
        c.end = start;
        self.end = start;
        if c.buf.len() < start + STREAM_READ {
            c.buf.resize(start + STREAM_READ, 0);
        }
        while !self.done {
            let wait = self.time_left(limits, since)?;
            let room = match self.body {
                Body::Length(_) => (STREAM_READ as u64).min(self.left) as usize,
                _ => STREAM_READ,
            };
            let Conn {
                stream,
                buf,
                up_buf,
                up_head,
                ..
            } = &mut *c;
            let read = tokio::select! {
                biased;
                r = up.read(&mut up_buf[*filled..]) => match r {
                    Ok(n) if n > 0 => {
                        *filled += n;
                        // Only a whole head that is not informational stops the body.
                        match up_head.parse(&up_buf[..*filled]) {
                            Ok(true) if (100..200).contains(&up_head.status)
                                && up_head.status != 101 => return Ok(Sent::Answered),
                            Ok(false) if *filled < up_buf.len() => continue,
                            _ => return Ok(Sent::Answered),
                        }
                    }
                    _ => return Ok(Sent::Answered),
                },
                r = crate::base::poll_time::timeout(wait, stream.read(&mut buf[start..start + room])) => r,
            };
            let n = bytes_read(read)?;
            self.received += n as u64;
            c.end = start + n;
            let written = match self.body {
                Body::Chunked => {
                    self.rechunk(c).map_err(Stop::Refused)?;
                    write_all(up, &c.out, write_timeout).await
                }
                _ => {
                    self.left -= n as u64;
                    self.done = self.left == 0;
                    let r = write_all(up, &c.buf[start..start + n], write_timeout).await;
                    c.end = start;
                    r
                }
            };
            if written.is_err() {
                // The server stopped reading: perhaps it answered (a 413) and closed.
                return Ok(Sent::Answered);
            }
        }
        Ok(Sent::Done)
    }

    /// The body's next bytes after the first part, for a server that asks for them (AJP):
    /// up to `want` bytes of data (de-chunked) read from the client at the listener's body
    /// rate, into `c.out` (cleared; empty at the body's end). The first part's room in the
    /// read buffer takes the reads: the request cannot be sent again from here on.
    pub async fn more(
        &mut self,
        c: &mut Conn,
        want: usize,
        limits: &ListenerLimits,
        since: Instant,
    ) -> Result<(), Stop> {
        let start = self.start;
        if !self.streamed {
            self.streamed = true;
            c.end = start;
            self.end = start;
        }
        let want = want.clamp(1, STREAM_READ);
        if c.buf.len() < start + want {
            c.buf.resize(start + want, 0);
        }
        c.out.clear();
        while c.out.is_empty() && !self.done {
            let wait = self.time_left(limits, since)?;
            let room = match self.body {
                Body::Length(_) => (want as u64).min(self.left) as usize,
                _ => want,
            };
            let read = crate::base::poll_time::timeout(
                wait,
                c.stream.read(&mut c.buf[start..start + room]),
            );
            let n = bytes_read(read.await)?;
            self.received += n as u64;
            c.end = start + n;
            match self.body {
                Body::Chunked => self.dechunk(c).map_err(Stop::Refused)?,
                _ => {
                    self.left -= n as u64;
                    self.done = self.left == 0;
                    c.out.extend_from_slice(&c.buf[start..start + n]);
                    c.end = start;
                }
            }
        }
        Ok(())
    }

    /// Decodes the chunked bytes just read (`buf[start..end]`) into their data in `out`;
    /// what follows the body's end (a pipelined request) moves to `start`.
    fn dechunk(&mut self, c: &mut Conn) -> Result<(), Refusal> {
        let start = self.start;
        let mut pos = start;
        while pos < c.end && !self.done {
            let (used, event) = self.decode(&c.buf[pos..c.end])?;
            if let Event::Data { start: s, end: e } = event {
                c.out.extend_from_slice(&c.buf[pos + s..pos + e]);
            }
            pos += used;
            self.done = event == Event::End;
        }
        if self.done {
            c.buf.copy_within(pos..c.end, start);
            c.end = start + (c.end - pos);
        } else {
            c.end = start;
        }
        Ok(())
    }

    /// The first part's data (de-chunked), for a server that takes data, not HTTP's
    /// framing (AJP).
    pub fn first_data<'b>(&self, buf: &'b [u8]) -> std::borrow::Cow<'b, [u8]> {
        let part = &buf[self.start..self.end];
        match self.body {
            Body::Chunked => {
                let mut data = Vec::new();
                let mut decoder = Decoder::default();
                let mut rest = part;
                while let Ok((used, event)) = decoder.next(rest) {
                    if let Event::Data { start, end } = event {
                        data.extend_from_slice(&rest[start..end]);
                    }
                    rest = &rest[used..];
                    if event == Event::End || rest.is_empty() {
                        break;
                    }
                }
                std::borrow::Cow::Owned(data)
            }
            _ => std::borrow::Cow::Borrowed(part),
        }
    }

    /// Decodes the chunked bytes just read (`buf[start..end]`) into chunks of tether's in
    /// `out`; what follows the body's end (a pipelined request) moves to `start`.
    fn rechunk(&mut self, c: &mut Conn) -> Result<(), Refusal> {
        let start = self.start;
        c.out.clear();
        let mut pos = start;
        while pos < c.end && !self.done {
            let (used, event) = self.decode(&c.buf[pos..c.end])?;
            if let Event::Data { start: s, end: e } = event {
                chunk(&mut c.out, &c.buf[pos + s..pos + e]);
            }
            pos += used;
            self.done = event == Event::End;
        }
        if self.done {
            c.out.extend_from_slice(b"0\r\n\r\n");
            c.buf.copy_within(pos..c.end, start);
            c.end = start + (c.end - pos);
        } else {
            c.end = start;
        }
        Ok(())
    }
}

/// Appends `data` as one chunk: its size in hex, the data, CRLF.
fn chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let mut digits = [0u8; 16];
    let mut n = data.len();
    let mut i = digits.len();
    while n > 0 || i == digits.len() {
        i -= 1;
        digits[i] = b"0123456789abcdef"[n & 15];
        n >>= 4;
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// A read of the body within its time: the bytes read, or why the body stopped (the wait
/// ran out or the socket's own timeout struck: too slow; the client closed or failed).
fn bytes_read<E>(read: Result<std::io::Result<usize>, E>) -> Result<usize, Stop> {
    match read {
        Ok(Ok(n)) if n > 0 => Ok(n),
        Ok(Err(e)) if e.kind() == ErrorKind::TimedOut => Err(Stop::TooSlow),
        Ok(_) => Err(Stop::Closed),
        Err(_) => Err(Stop::TooSlow),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_framed_in_hex() {
        let mut out = Vec::new();
        chunk(&mut out, b"hello");
        chunk(&mut out, &[b'x'; 300]);
        chunk(&mut out, b"");
        assert!(out.starts_with(b"5\r\nhello\r\n12c\r\nxxx"));
        assert!(out.ends_with(b"x\r\n"));
        assert_eq!(out.len(), 10 + 5 + 300 + 2);
    }
}
