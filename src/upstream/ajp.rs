//! The server's side of a try over AJP/1.3 (`crate::ajp`): packets read one at a time into
//! the front end's buffer while the client is watched, with a kept connection the server
//! had closed told apart (it may go again), and the request's body sent in packets as the
//! server asks for them.

use super::Watch;
use crate::ajp::packet::frame;
use crate::pipeline::Failure;
use pingora_core::protocols::Stream;
use std::ops::Range;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The server's packets on a connection, read into a buffer: `buf[pos..filled]` is read
/// and not taken yet.
pub struct Packets {
    pos: usize,
    filled: usize,
    /// Bytes came from the server on this try.
    heard: bool,
}

impl Packets {
    pub fn new() -> Self {
        Packets {
            pos: 0,
            filled: 0,
            heard: false,
        }
    }

    /// The next packet's payload, as a range of `buf`; each read of the server waits at
    /// most `timeout`. On a kept connection (`reused`), a close before any byte is `Stale`.
    pub async fn next(
        &mut self,
        up: &mut Stream,
        buf: &mut Vec<u8>,
        (max, timeout, reused): (usize, Duration, bool),
        client: &mut impl Watch,
    ) -> Result<Range<usize>, Failure> {
        if buf.len() < max {
            buf.resize(max, 0);
        }
        loop {
            match frame(&buf[self.pos..self.filled], max) {
                Ok(Some(payload)) => {
                    let at = self.pos;
                    self.pos += payload.end;
                    return Ok(at + payload.start..at + payload.end);
                }
                Ok(None) => {}
                Err(m) => return Err(Failure::Upstream(502, m.0)),
            }
            // Room for a whole packet after what is left of this one.
            if self.pos > 0 {
                buf.copy_within(self.pos..self.filled, 0);
                self.filled -= self.pos;
                self.pos = 0;
            }
            let read = tokio::select! {
                r = crate::poll_time::timeout(timeout, up.read(&mut buf[self.filled..])) => r,
                () = std::future::poll_fn(|cx| client.poll_gone(cx)) => {
                    return Err(Failure::Client(499))
                }
            };
            match read {
                Err(_) => return Err(Failure::Upstream(504, "the server did not answer in time")),
                Ok(Ok(0)) | Ok(Err(_)) if reused && !self.heard => return Err(Failure::Stale),
                Ok(Ok(0)) => {
                    return Err(Failure::Upstream(502, "the server closed the connection"))
                }
                Ok(Err(_)) => return Err(Failure::Upstream(502, "reading the answer failed")),
                Ok(Ok(n)) => {
                    self.filled += n;
                    self.heard = true;
                }
            }
        }
    }

    /// Nothing was read past the last packet taken: the connection may carry another
    /// request.
    pub fn clean(&self) -> bool {
        self.pos == self.filled
    }
}

impl Default for Packets {
    fn default() -> Self {
        Packets::new()
    }
}

/// The server's answer fields, as the pipeline reads them.
pub struct AjpFields<'a>(pub crate::ajp::ResponseHeaders<'a>);

impl crate::routing::Fields for AjpFields<'_> {
    fn values<'a>(
        &'a self,
        name: &'a http::HeaderName,
    ) -> impl DoubleEndedIterator<Item = &'a [u8]> + 'a {
        // Collected: the fields are read again from the packet, forwards only.
        let values: Vec<&[u8]> = self
            .0
            .clone()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_str().as_bytes()))
            .map(|(_, v)| v)
            .collect();
        values.into_iter()
    }
}
