//! What a multiplexed connection gives one of its request streams: the request's body as
//! it comes ([`RecvBody`]), a way to answer ([`Respond`]) and the answer's body sent within
//! the client's flow-control window ([`SendBody`]). HTTP/2 (over the `h2` crate) and HTTP/3
//! (over quiche) each implement them for their streams; the request's steps are written
//! once over them.

use bytes::Bytes;
use std::future::Future;
use std::task::{Context, Poll};

/// The stream is gone: the client reset it, or its connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;

/// Why tether resets a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reset {
    /// tether cannot go on with the answer (the server's failed mid-body, a field that is
    /// no field).
    Internal,
    /// The client took too long (its window stayed shut).
    Cancel,
}

/// The request's body, from the client.
pub trait RecvBody: Send {
    /// Nothing more comes from the client.
    fn is_end_stream(&self) -> bool;

    /// The next data (`None` at the body's end). Its window is not given back until
    /// [`RecvBody::release`].
    fn data(&mut self) -> impl Future<Output = Option<Result<Bytes, Gone>>> + Send;

    /// Gives `n` bytes of window back to the client: they were taken.
    fn release(&mut self, n: usize);
}

/// The answer's body, to the client.
pub trait SendBody: Send {
    /// Asks for window for `n` more bytes.
    fn reserve_capacity(&mut self, n: usize);

    /// Window granted (`Some(Ok(0))` may come before the rest), or the stream is gone.
    fn poll_capacity(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<usize, Gone>>>;

    /// Sends `data` (no more than the window granted), ending the stream when `end`.
    fn send_data(&mut self, data: Bytes, end: bool) -> Result<(), Gone>;

    /// Resets the stream.
    fn reset(&mut self, why: Reset);

    /// Ready when the client reset the stream.
    fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<()>;
}

/// The way to answer a stream.
pub trait Respond: Send {
    type Body: SendBody;

    /// The protocol's version, as the request's metrics and log name it.
    const VERSION: http::Version;

    /// Sends an informational head (`100 Continue`, `103 Early Hints`).
    fn send_informational(&mut self, head: http::Response<()>) -> Result<(), Gone>;

    /// Sends the answer's head, ending the stream when `end`: the body's sender.
    fn send_response(&mut self, head: http::Response<()>, end: bool) -> Result<Self::Body, Gone>;

    /// Resets the stream before its head.
    fn reset(&mut self, why: Reset);

    /// Ready when the client reset the stream.
    fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<()>;
}
