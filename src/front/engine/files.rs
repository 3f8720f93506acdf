//! A file answer ([`Served`]) on the engine's wire: the head, then the body: a small one in
//! the same write as the head, a larger one by `sendfile` on a plain TCP connection (from
//! the page cache on this thread, else from the blocking pool), and in chunks through the
//! TLS stream otherwise.

use super::answer::{field, status_line};
use super::conn::{to_client, Conn};
use crate::config::ListenerLimits;
use crate::pipeline::files::{Body, Served, CHUNK};
use crate::pipeline::write_on_stack;
use rustix::fd::{BorrowedFd, OwnedFd};
use std::io;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

/// A body this small goes out with the head, read into the write buffer.
const WITH_HEAD: u64 = 16 * 1024;

/// Sends `served`; `close`: the connection closes after it (the head says so).
pub(super) async fn send(
    c: &mut Conn,
    mut served: Served<'_>,
    close: bool,
    limits: &ListenerLimits,
    listener: &str,
) -> io::Result<()> {
    c.out.clear();
    status_line(&mut c.out, served.status);
    served.fields(|name, value| field(&mut c.out, name.as_bytes(), value));
    if let Some(length) = served.length {
        let mut digits = [0u8; 48];
        field(
            &mut c.out,
            b"Content-Length",
            write_on_stack(&mut digits, length),
        );
    }
    if close {
        field(&mut c.out, b"Connection", b"close");
    }
    c.out.extend_from_slice(b"\r\n");
    let Some(mut body) = served.body.take() else {
        return c.write_out(limits, listener).await;
    };
    if body.remaining() <= WITH_HEAD {
        // A read may return less than asked (part of the file in the page cache).
        while !body.is_done() {
            let n = body.remaining() as usize;
            body.read(&mut c.out, n).await?;
        }
        return c.write_out(limits, listener).await;
    }
    c.write_out(limits, listener).await?;
    if c.tls().is_none() {
        return sendfile(c, &mut body, limits, listener).await;
    }
    let mut chunk = Vec::with_capacity(CHUNK);
    while !body.is_done() {
        chunk.clear();
        body.read(&mut chunk, CHUNK).await?;
        to_client(&mut c.stream, &chunk, limits, listener).await?;
    }
    Ok(())
}

/// The body by `sendfile` to the connection's socket: on this thread while the page cache
/// holds what is left (`cachestat`), in the blocking pool otherwise (`sendfile` cannot
/// refuse to wait for the disk). When the socket takes no more, the next chunk goes through
/// the stream's own write, which waits for the client to read: the socket is never
/// registered twice with the reactor for the common case.
async fn sendfile(
    c: &mut Conn,
    body: &mut Body,
    limits: &ListenerLimits,
    listener: &str,
) -> io::Result<()> {
    c.stream.flush().await?;
    let fd = c.stream.id();
    let mut duplicate: Option<Arc<OwnedFd>> = None;
    let mut chunk = Vec::new();
    while !body.is_done() {
        let done = if body.cached() {
            // SAFETY: the descriptor is the stream's, open while `c` is borrowed here, and
            // used only for this call.
            body.send_now(unsafe { BorrowedFd::borrow_raw(fd) })?
        } else {
            let socket = match &duplicate {
                Some(s) => s.clone(),
                // The pool's task owns its descriptor: a cancelled request must not leave
                // it writing to a number the process has reused.
                None => duplicate
                    .insert(Arc::new(rustix::io::fcntl_dupfd_cloexec(
                        // SAFETY: as above; only duplicated.
                        unsafe { BorrowedFd::borrow_raw(fd) },
                        0,
                    )?))
                    .clone(),
            };
            body.send_round(&socket).await?
        };
        if !done {
            chunk.clear();
            body.read(&mut chunk, CHUNK).await?;
            to_client(&mut c.stream, &chunk, limits, listener).await?;
        }
    }
    Ok(())
}
