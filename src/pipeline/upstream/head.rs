//! The server's answer head, read into the front end's buffer while the client is
//! watched: a client that goes away while the server works is noticed at once, and the
//! exchange abandoned (499, as nginx logs it).

use crate::pipeline::{Failure, DROPPED};
use crate::routing::Timeouts;
use crate::wire::http1::response::{Framing, ResponseHead};
use pingora_core::protocols::Stream;
use std::task::{Context, Poll};
use tokio::io::AsyncReadExt;

/// Largest server head read (Pingora's bound for a response head is the same 1 MiB).
pub const MAX_RESPONSE_HEAD: usize = 1 << 20;

/// The client of the request, watched while the server works.
pub trait Watch {
    /// Ready when the client went away (closed its connection, or reset its stream).
    fn poll_gone(&mut self, cx: &mut Context<'_>) -> Poll<()>;
}

/// Reads the server's head into `buf` (`filled` bytes of it so far, on a connection kept
/// from an earlier request when `reused`): its length, how its body is framed (none to a
/// `HEAD` request), and whether the server keeps the connection.
pub async fn read_head(
    up: &mut Stream,
    (buf, head): (&mut Vec<u8>, &mut ResponseHead),
    filled: &mut usize,
    (reused, head_request): (bool, bool),
    timeouts: Timeouts,
    client: &mut impl Watch,
) -> Result<(usize, Framing, bool), Failure> {
    loop {
        match head.parse(&buf[..*filled]) {
            Ok(true) => {
                let (framing, keeps) = head.framing(buf, head_request).map_err(Failure::Junk)?;
                return Ok((head.len, framing, keeps));
            }
            Ok(false) => {}
            Err(why) => return Err(Failure::Junk(why)),
        }
        if *filled == buf.len() {
            if buf.len() >= MAX_RESPONSE_HEAD {
                return Err(Failure::Junk("a response head too large"));
            }
            let len = buf.len() * 2;
            buf.resize(len.min(MAX_RESPONSE_HEAD), 0);
        }
        let read = tokio::select! {
            r = crate::base::poll_time::timeout(timeouts.read, up.read(&mut buf[*filled..])) => r,
            () = std::future::poll_fn(|cx| client.poll_gone(cx)) => {
                return Err(Failure::Client(499))
            }
        };
        match read {
            Err(_) => return Err(Failure::Timeout),
            Ok(Ok(0)) | Ok(Err(_)) if reused && *filled == 0 => return Err(Failure::Stale),
            Ok(Ok(0)) | Ok(Err(_)) if *filled == 0 => return Err(Failure::Dropped(DROPPED)),
            Ok(Ok(0)) => return Err(Failure::Junk("the server closed the connection mid-answer")),
            Ok(Err(_)) => return Err(Failure::Junk("reading the answer failed")),
            Ok(Ok(n)) => *filled += n,
        }
    }
}

/// The server's answer head, as the pipeline reads its fields.
pub struct ServerFields<'a>(pub &'a ResponseHead, pub &'a [u8]);

impl crate::routing::Fields for ServerFields<'_> {
    fn values<'a>(
        &'a self,
        name: &'a http::HeaderName,
    ) -> impl DoubleEndedIterator<Item = &'a [u8]> + 'a {
        self.0.values(self.1, name.as_str())
    }
}
