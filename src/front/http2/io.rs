//! An HTTP/2 stream as the request's steps use a stream (`front::streams::io`), over the
//! `h2` crate's halves of it.

use crate::front::streams::io::{Gone, RecvBody, Reset, Respond, SendBody};
use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use std::task::{Context, Poll};

fn reason(why: Reset) -> Reason {
    match why {
        Reset::Internal => Reason::INTERNAL_ERROR,
        Reset::Cancel => Reason::CANCEL,
    }
}

impl RecvBody for RecvStream {
    fn is_end_stream(&self) -> bool {
        RecvStream::is_end_stream(self)
    }

    async fn data(&mut self) -> Option<Result<Bytes, Gone>> {
        RecvStream::data(self).await.map(|r| r.map_err(|_| Gone))
    }

    fn release(&mut self, n: usize) {
        let _ = self.flow_control().release_capacity(n);
    }
}

impl SendBody for SendStream<Bytes> {
    fn reserve_capacity(&mut self, n: usize) {
        SendStream::reserve_capacity(self, n);
    }

    fn poll_capacity(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<usize, Gone>>> {
        SendStream::poll_capacity(self, cx).map(|c| c.map(|r| r.map_err(|_| Gone)))
    }

    fn send_data(&mut self, data: Bytes, end: bool) -> Result<(), Gone> {
        SendStream::send_data(self, data, end).map_err(|_| Gone)
    }

    fn reset(&mut self, why: Reset) {
        self.send_reset(reason(why));
    }

    fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        SendStream::poll_reset(self, cx).map(|_| ())
    }
}

impl Respond for SendResponse<Bytes> {
    type Body = SendStream<Bytes>;
    const VERSION: http::Version = http::Version::HTTP_2;

    fn send_informational(&mut self, head: http::Response<()>) -> Result<(), Gone> {
        SendResponse::send_informational(self, head).map_err(|_| Gone)
    }

    fn send_response(&mut self, head: http::Response<()>, end: bool) -> Result<Self::Body, Gone> {
        SendResponse::send_response(self, head, end).map_err(|_| Gone)
    }

    fn reset(&mut self, why: Reset) {
        self.send_reset(reason(why));
    }

    fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        SendResponse::poll_reset(self, cx).map(|_| ())
    }
}
