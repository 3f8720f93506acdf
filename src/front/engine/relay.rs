//! An answer's body relayed from the server to the client as it comes: by its length,
//! chunked (passed on, or de-chunked for an HTTP/1.0 client), or until the server closes;
//! the edited head goes out with the body's first bytes.

use super::conn::{to_client, Conn};
use crate::config::ListenerLimits;
use crate::routing::Timeouts;
use crate::wire::http1::chunked::{Decoder, Event};
use crate::wire::http1::response::Framing;
use pingora_core::protocols::Stream;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncReadExt, ReadBuf};

/// Largest read of an answer's body: a large body is relayed in reads of up to 64 KiB
/// (one read and one write each), not of the head's 4 KiB.
const MAX_BODY_READ: usize = 64 * 1024;

/// Grows the server's read buffer towards `want` bytes, up to [`MAX_BODY_READ`] (once per
/// connection: it stays that size for the connection's next answers).
fn grow(buf: &mut Vec<u8>, want: u64) {
    let want = usize::try_from(want)
        .unwrap_or(usize::MAX)
        .min(MAX_BODY_READ);
    if want > buf.len() {
        buf.resize(want, 0);
    }
}

/// Reads into `buf` what the server has already sent, without waiting: a read that would
/// wait reads nothing (`AsyncRead`'s contract) and leaves the wait to the relay's next
/// read. The bytes read.
fn read_ready(up: &mut Stream, buf: &mut [u8]) -> usize {
    let mut cx = Context::from_waker(Waker::noop());
    let mut got = 0;
    while got < buf.len() {
        let mut read = ReadBuf::new(&mut buf[got..]);
        match Pin::new(&mut **up).poll_read(&mut cx, &mut read) {
            Poll::Ready(Ok(())) if !read.filled().is_empty() => got += read.filled().len(),
            // Pending, the end or an error: the relay's next read meets it.
            _ => break,
        }
    }
    got
}

pub(super) enum RelayError {
    Client,
    Server(&'static str),
}

/// Relays the body after the head (`up_buf[start..filled]` is already read), the head
/// going out with its first bytes. `Ok(true)` when the server's connection ended cleanly
/// at the body's end (it may be kept).
pub(super) async fn relay(
    up: &mut Stream,
    c: &mut Conn,
    framing: Framing,
    dechunk: bool,
    (start, filled): (usize, usize),
    timeouts: Timeouts,
    (limits, listener): (&ListenerLimits, &str),
) -> Result<bool, RelayError> {
    let Conn {
        stream,
        out,
        up_buf,
        ..
    } = c;
    // A body of known length: the head goes out with its first bytes and what of the rest
    // the server has already sent (read into `up_buf` once the first bytes are out of
    // it): one write for an answer that came whole, as nginx's one `writev`.
    let mut left_after_head = 0;
    if let Framing::Length(n) = framing {
        let first = ((filled - start) as u64).min(n) as usize;
        let mut left = n - first as u64;
        out.extend_from_slice(&up_buf[start..start + first]);
        grow(up_buf, left);
        if left > 0 {
            let room = up_buf
                .len()
                .min(usize::try_from(left).unwrap_or(usize::MAX));
            let more = read_ready(up, &mut up_buf[..room]);
            out.extend_from_slice(&up_buf[..more]);
            left -= more as u64;
        }
        left_after_head = left;
    }
    let mut head = true;
    let mut send = async |data: &[u8], stream: &mut Stream| -> Result<(), RelayError> {
        let r = if std::mem::take(&mut head) {
            out.extend_from_slice(data);
            to_client(stream, out, limits, listener).await
        } else if data.is_empty() {
            Ok(())
        } else {
            to_client(stream, data, limits, listener).await
        };
        r.map_err(|_| RelayError::Client)
    };
    let read = async |up: &mut Stream, buf: &mut [u8]| -> Result<usize, RelayError> {
        match crate::base::poll_time::timeout(timeouts.read, up.read(buf)).await {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(_)) => Err(RelayError::Server("reading the answer's body failed")),
            Err(_) => Err(RelayError::Server("the answer's body did not come in time")),
        }
    };
    match framing {
        Framing::None => {
            send(&[], stream).await?;
            Ok(filled == start)
        }
        Framing::Length(n) => {
            let have = (filled - start) as u64;
            send(&[], stream).await?;
            let mut left = left_after_head;
            while left > 0 {
                let room = up_buf
                    .len()
                    .min(usize::try_from(left).unwrap_or(usize::MAX));
                let k = read(up, &mut up_buf[..room]).await?;
                if k == 0 {
                    return Err(RelayError::Server(
                        "the server closed before the body's end",
                    ));
                }
                send(&up_buf[..k], stream).await?;
                left -= k as u64;
            }
            Ok(have <= n)
        }
        Framing::Chunked => {
            let mut decoder = Decoder::default();
            let (mut from, mut pos, mut end) = (start, start, filled);
            loop {
                let (used, event) = decoder
                    .next(&up_buf[pos..end])
                    .map_err(|_| RelayError::Server("a malformed chunked body"))?;
                if dechunk {
                    if let Event::Data { start: s, end: e } = event {
                        send(&up_buf[pos + s..pos + e], stream).await?;
                    }
                }
                pos += used;
                match event {
                    Event::End => {
                        if !dechunk {
                            send(&up_buf[from..pos], stream).await?;
                        } else {
                            send(&[], stream).await?;
                        }
                        return Ok(pos == end);
                    }
                    Event::Data { .. } if pos < end => continue,
                    _ => {}
                }
                if !dechunk {
                    send(&up_buf[from..end], stream).await?;
                }
                let k = read(up, &mut up_buf[..]).await?;
                if k == 0 {
                    return Err(RelayError::Server(
                        "the server closed before the body's end",
                    ));
                }
                (from, pos, end) = (0, 0, k);
            }
        }
        Framing::Close => {
            send(&up_buf[start..filled], stream).await?;
            loop {
                let k = read(up, &mut up_buf[..]).await?;
                if k == 0 {
                    return Ok(false);
                }
                send(&up_buf[..k], stream).await?;
                if k == up_buf.len() {
                    grow(up_buf, 2 * k as u64);
                }
            }
        }
    }
}
