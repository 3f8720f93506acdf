//! An answer's body read from the server as data, for a front end that frames it for its
//! client itself (HTTP/2): by its length, de-chunked, or until the server closes.

use crate::wire::http1::chunked::{Decoder, Event};
use crate::wire::http1::response::Framing;
use pingora_core::protocols::Stream;
use std::ops::Range;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Largest read of an answer's body.
const MAX_BODY_READ: usize = 64 * 1024;

/// An answer's body being read, in the server's read buffer.
pub struct BodyReader {
    framing: Framing,
    /// Bytes of a body of known length not read yet.
    left: u64,
    decoder: Decoder,
    /// The buffer's unread bytes: `pos..end`.
    pos: usize,
    end: usize,
    done: bool,
    /// The server's connection ended cleanly at the body's end (it may be kept).
    clean: bool,
}

impl BodyReader {
    /// The body framed as `framing`, whose first bytes are `buf[start..filled]`.
    pub fn new(framing: Framing, (start, filled): (usize, usize)) -> Self {
        BodyReader {
            framing,
            left: match framing {
                Framing::Length(n) => n,
                _ => 0,
            },
            decoder: Decoder::default(),
            pos: start,
            end: filled,
            done: matches!(framing, Framing::None | Framing::Length(0)),
            clean: matches!(framing, Framing::None | Framing::Length(0)) && start == filled,
        }
    }

    /// Nothing of the body is left to read.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The body ended and nothing came after it: the connection may be kept.
    pub fn clean(&self) -> bool {
        self.done && self.clean
    }

    /// The bytes of the body's length that are not read yet (`None`: not known).
    pub fn left(&self) -> Option<u64> {
        match self.framing {
            Framing::Length(_) => Some(self.left),
            Framing::None => Some(0),
            _ => None,
        }
    }

    /// The body's next data, as a range of `buf`, or `None` at its end; each read of the
    /// server waits at most `timeout`.
    pub async fn next(
        &mut self,
        up: &mut Stream,
        buf: &mut Vec<u8>,
        timeout: Duration,
    ) -> Result<Option<Range<usize>>, &'static str> {
        loop {
            if self.done {
                return Ok(None);
            }
            match self.framing {
                Framing::None => {
                    self.done = true;
                    return Ok(None);
                }
                Framing::Length(_) if self.pos < self.end => {
                    let n = ((self.end - self.pos) as u64).min(self.left) as usize;
                    let data = self.pos..self.pos + n;
                    self.pos += n;
                    self.left -= n as u64;
                    if self.left == 0 {
                        self.done = true;
                        self.clean = self.pos == self.end;
                    }
                    return Ok(Some(data));
                }
                Framing::Chunked if self.pos < self.end => {
                    let at = self.pos;
                    let (used, event) = self
                        .decoder
                        .next(&buf[at..self.end])
                        .map_err(|_| "a malformed chunked body")?;
                    self.pos += used;
                    match event {
                        Event::Data { start, end } => return Ok(Some(at + start..at + end)),
                        Event::End => {
                            self.done = true;
                            self.clean = self.pos == self.end;
                            return Ok(None);
                        }
                        Event::More => continue,
                    }
                }
                Framing::Close if self.pos < self.end => {
                    let data = self.pos..self.end;
                    self.pos = self.end;
                    return Ok(Some(data));
                }
                _ => {}
            }
            if buf.len() < MAX_BODY_READ {
                buf.resize(MAX_BODY_READ, 0);
            }
            let room = match self.framing {
                Framing::Length(_) => buf
                    .len()
                    .min(usize::try_from(self.left).unwrap_or(usize::MAX)),
                _ => buf.len(),
            };
            let k = match crate::base::poll_time::timeout(timeout, up.read(&mut buf[..room])).await
            {
                Ok(Ok(k)) => k,
                Ok(Err(_)) => return Err("reading the answer's body failed"),
                Err(_) => return Err("the answer's body did not come in time"),
            };
            if k == 0 {
                if self.framing == Framing::Close {
                    self.done = true;
                    return Ok(None);
                }
                return Err("the server closed before the body's end");
            }
            (self.pos, self.end) = (0, k);
        }
    }
}
