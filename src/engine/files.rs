//! A file answer ([`Served`]) on the engine's wire: the head, then the body: a small one in
//! the same write as the head, a larger one by `sendfile` on a plain TCP connection, and in
//! chunks through the TLS stream otherwise.

use super::answer::{field, status_line};
use super::conn::{to_client, Conn};
use crate::config::ListenerLimits;
use crate::files::{Body, Served, CHUNK};
use crate::proxy::write_on_stack;
use rustix::fd::{BorrowedFd, OwnedFd};
use std::io;
use std::sync::Arc;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncWriteExt, Interest};

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
        let n = body.remaining() as usize;
        body.read(&mut c.out, n).await?;
        return c.write_out(limits, listener).await;
    }
    c.write_out(limits, listener).await?;
    if c.tls().is_none() {
        return sendfile(c, &mut body, limits).await;
    }
    let mut chunk = Vec::with_capacity(CHUNK);
    while !body.is_done() {
        chunk.clear();
        body.read(&mut chunk, CHUNK).await?;
        to_client(&mut c.stream, &chunk, limits, listener).await?;
    }
    Ok(())
}

/// The body by `sendfile` to the connection's socket. The socket is the stream's, which
/// tokio's reactor watches already: a duplicate of it is registered to wait on, only when
/// the socket's buffer fills.
async fn sendfile(c: &mut Conn, body: &mut Body, limits: &ListenerLimits) -> io::Result<()> {
    c.stream.flush().await?;
    // SAFETY: the descriptor is the stream's, open while `c` is borrowed here; it is only
    // duplicated.
    let own = unsafe { BorrowedFd::borrow_raw(c.stream.id()) };
    let socket = Arc::new(rustix::io::fcntl_dupfd_cloexec(own, 0)?);
    let mut ready: Option<AsyncFd<Arc<OwnedFd>>> = None;
    while !body.send_round(&socket).await? {
        let ready = match &mut ready {
            Some(r) => r,
            // SAFETY: the `Arc` keeps the duplicate open, unchanged, as long as the `AsyncFd`.
            None => ready.insert(unsafe {
                AsyncFd::register_with_interest(socket.clone(), Interest::WRITABLE)?
            }),
        };
        let wait = crate::proxy::write_timeout(limits, CHUNK);
        match crate::poll_time::timeout(wait, ready.writable()).await {
            Ok(guard) => guard?.clear_ready(),
            Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client did not read in time",
                ))
            }
        }
    }
    Ok(())
}
