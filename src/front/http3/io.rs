//! An HTTP/3 request stream as the request's steps use a stream (`front::streams::io`). The
//! QUIC connection is its task's alone (`conn.rs`): a stream's future, polled in that same
//! task, hands what it sends to the connection as commands, and reads its body from a
//! channel the connection fills. What the two share per stream is atomics: the bytes the
//! connection holds for it unsent (the stream waits for window while they are past a
//! bound), the body bytes it holds unread, and whether the client reset it.

use crate::front::streams::io::{Gone, RecvBody, Reset, Respond, SendBody};
use bytes::Bytes;
use futures::task::AtomicWaker;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

/// The answer's bytes a stream may have waiting in its connection, unsent: its window.
pub const SEND_WINDOW: usize = 64 * 1024;

/// The body bytes a stream may have waiting for it, read from QUIC but not taken: past
/// this, QUIC's own flow control holds the client back.
pub const RECV_WINDOW: usize = 64 * 1024;

/// What a stream and its connection share.
#[derive(Default)]
pub struct Shared {
    /// Answer bytes handed to the connection and not yet taken by QUIC.
    pub unsent: AtomicUsize,
    /// Body bytes the connection read for the stream and the stream has not taken.
    pub unread: AtomicUsize,
    /// The client reset the stream (or stopped reading it), or the connection ended.
    pub gone: AtomicBool,
    /// The stream waiting for window.
    pub window: AtomicWaker,
    /// The stream watching for a reset.
    pub reset: AtomicWaker,
}

impl Shared {
    /// The stream is gone: whatever waits on it wakes.
    pub fn end(&self) {
        self.gone.store(true, Ordering::Release);
        self.window.wake();
        self.reset.wake();
    }

    fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }
}

/// What a stream asks its connection to do.
pub enum Command {
    /// The answer's head (`fin`: no body follows).
    Head {
        id: u64,
        fields: Vec<quiche::h3::Header>,
        fin: bool,
    },
    /// Body bytes (`fin`: the last).
    Data { id: u64, data: Bytes, fin: bool },
    /// Body bytes were taken: the connection may read more.
    Taken { id: u64 },
    /// Reset the stream.
    Reset { id: u64, code: u64 },
}

fn code(why: Reset) -> u64 {
    match why {
        // H3_INTERNAL_ERROR, H3_REQUEST_CANCELLED (RFC 9114 §8.1).
        Reset::Internal => 0x0102,
        Reset::Cancel => 0x010c,
    }
}

/// The request's body: what the connection reads for the stream, in order; an error when
/// the client reset it.
pub struct Body {
    pub id: u64,
    pub shared: Arc<Shared>,
    pub data: UnboundedReceiver<Result<Bytes, Gone>>,
    pub commands: UnboundedSender<Command>,
    /// The client sent the request with its end (no body).
    pub ended: bool,
}

impl RecvBody for Body {
    fn is_end_stream(&self) -> bool {
        self.ended
    }

    async fn data(&mut self) -> Option<Result<Bytes, Gone>> {
        if self.ended {
            return None;
        }
        match self.data.recv().await {
            Some(Ok(data)) => Some(Ok(data)),
            Some(Err(gone)) => Some(Err(gone)),
            None => {
                self.ended = true;
                None
            }
        }
    }

    fn release(&mut self, n: usize) {
        let before = self.shared.unread.fetch_sub(n, Ordering::AcqRel);
        // Only a stream the connection stopped reading for needs to say so.
        if before >= RECV_WINDOW && before - n < RECV_WINDOW {
            let _ = self.commands.send(Command::Taken { id: self.id });
        }
    }
}

/// The answer's sending half, once its head went.
pub struct Sending {
    id: u64,
    shared: Arc<Shared>,
    commands: UnboundedSender<Command>,
}

impl SendBody for Sending {
    fn reserve_capacity(&mut self, _n: usize) {}

    fn poll_capacity(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<usize, Gone>>> {
        if self.shared.is_gone() {
            return Poll::Ready(Some(Err(Gone)));
        }
        let free = || SEND_WINDOW.saturating_sub(self.shared.unsent.load(Ordering::Acquire));
        if free() > 0 {
            return Poll::Ready(Some(Ok(free())));
        }
        self.shared.window.register(cx.waker());
        match (self.shared.is_gone(), free()) {
            (true, _) => Poll::Ready(Some(Err(Gone))),
            (false, 0) => Poll::Pending,
            (false, n) => Poll::Ready(Some(Ok(n))),
        }
    }

    fn send_data(&mut self, data: Bytes, fin: bool) -> Result<(), Gone> {
        if self.shared.is_gone() {
            return Err(Gone);
        }
        self.shared.unsent.fetch_add(data.len(), Ordering::AcqRel);
        let id = self.id;
        self.commands
            .send(Command::Data { id, data, fin })
            .map_err(|_| Gone)
    }

    fn reset(&mut self, why: Reset) {
        let (id, code) = (self.id, code(why));
        let _ = self.commands.send(Command::Reset { id, code });
    }

    fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        poll_gone(&self.shared, cx)
    }
}

fn poll_gone(shared: &Shared, cx: &mut Context<'_>) -> Poll<()> {
    if shared.is_gone() {
        return Poll::Ready(());
    }
    shared.reset.register(cx.waker());
    match shared.is_gone() {
        true => Poll::Ready(()),
        false => Poll::Pending,
    }
}

/// The way to answer an HTTP/3 stream.
pub struct Answer {
    pub id: u64,
    pub shared: Arc<Shared>,
    pub commands: UnboundedSender<Command>,
}

impl Respond for Answer {
    type Body = Sending;
    const VERSION: http::Version = http::Version::HTTP_3;

    /// Not sent: an interim head is a hint a client does without (quiche sends one head
    /// per request stream).
    fn send_informational(&mut self, _head: http::Response<()>) -> Result<(), Gone> {
        Ok(())
    }

    fn send_response(&mut self, head: http::Response<()>, fin: bool) -> Result<Sending, Gone> {
        if self.shared.is_gone() {
            return Err(Gone);
        }
        let fields = super::request::fields(&head);
        let id = self.id;
        self.commands
            .send(Command::Head { id, fields, fin })
            .map_err(|_| Gone)?;
        Ok(Sending {
            id,
            shared: self.shared.clone(),
            commands: self.commands.clone(),
        })
    }

    fn reset(&mut self, why: Reset) {
        let (id, code) = (self.id, code(why));
        let _ = self.commands.send(Command::Reset { id, code });
    }

    fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        poll_gone(&self.shared, cx)
    }
}
