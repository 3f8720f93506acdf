//! The wait of a kept-alive connection that gave its buffers back ([`super::Next::Idle`])
//! for its next request: one small future of its own (the connection, the server's stop
//! and the deadline; about 200 bytes), which is most of what such a connection holds in
//! its task while it waits. Its first bytes are read on the stack of the poll.

use super::conn::{Conn, IDLE_READ};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::ReadBuf;
use tokio::sync::futures::Notified;
use tokio::time::Sleep;

/// How an idle connection's wait ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Woke {
    /// The next request's first bytes came: the buffers are taken again, with them.
    Request,
    /// The client closed, or the read failed.
    Closed,
    /// The server is stopping.
    Stopping,
    /// The deadline passed with no byte.
    TimedOut,
}

pin_project! {
    /// Made by [`super::Engine::idle`].
    pub struct IdleWait<'a> {
        pub(super) conn: &'a mut Conn,
        // The server was stopping when the wait was made.
        pub(super) stopping: bool,
        #[pin]
        pub(super) stop: Notified<'a>,
        #[pin]
        pub(super) deadline: Sleep,
    }
}

impl Future for IdleWait<'_> {
    type Output = Woke;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Woke> {
        let this = self.project();
        if *this.stopping || this.stop.poll(cx).is_ready() {
            return Poll::Ready(Woke::Stopping);
        }
        // A read that must wait keeps nothing of the buffer (`AsyncRead`'s contract).
        let mut first = [0u8; IDLE_READ];
        let mut buf = ReadBuf::new(&mut first);
        match Pin::new(&mut *this.conn.stream).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                this.conn.restore(buf.filled());
                return Poll::Ready(Woke::Request);
            }
            Poll::Ready(_) => return Poll::Ready(Woke::Closed),
            Poll::Pending => {}
        }
        match this.deadline.poll(cx) {
            Poll::Ready(()) => Poll::Ready(Woke::TimedOut),
            Poll::Pending => Poll::Pending,
        }
    }
}
