//! The wait of a kept-alive connection that gave its buffers back ([`super::Next::Idle`])
//! for its next request: one small future of its own (the connection, the server's stop
//! and the deadline; about 200 bytes), which is most of what such a connection holds in
//! its task while it waits. Its first bytes are read on the stack of the poll, and the
//! connection's whole record is made again around them.

use super::conn::{Conn, IdleConn, IDLE_READ};
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

/// An engine connection as its task holds it between and during requests.
pub enum Held {
    /// Its whole record, buffers and all: serving, or woken for its next request.
    Busy(Box<Conn>),
    /// Waiting for its next request, its buffers given back.
    Idle(Box<IdleConn>),
    /// Out (a busy run has it), or ended.
    Gone,
}

pin_project! {
    /// Made by [`super::Engine::idle`]: when it ends with [`Woke::Request`], the connection
    /// is [`Held::Busy`] again.
    pub struct IdleWait<'a> {
        pub(super) held: &'a mut Held,
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
        let Held::Idle(idle) = &mut **this.held else {
            return Poll::Ready(Woke::Closed);
        };
        let mut first = [0u8; IDLE_READ];
        let mut buf = ReadBuf::new(&mut first);
        match Pin::new(&mut *idle.stream).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                if let Held::Idle(idle) = std::mem::replace(*this.held, Held::Gone) {
                    **this.held = Held::Busy((*idle).wake(buf.filled()));
                }
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
