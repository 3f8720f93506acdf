//! A request's body on a stream: the part read before a server is chosen (the
//! listener's `request_buffer`), which goes with the head and again on a retry, then the
//! rest, sent to the server as it comes (chunked when the client gave no length), with no
//! retry once it began. Every read keeps to the listener's body rate, counted from the
//! request's start; the window is given back as the bytes are taken.

use super::io::{Gone, RecvBody};
use crate::config::ListenerLimits;
use crate::pipeline::{Failure, Stop};
use crate::wire::http1::chunked::{chunk, LAST_CHUNK};
use crate::wire::http1::framing::Body;
use crate::wire::http1::head::Refusal;
use bytes::Bytes;
use pingora_core::protocols::Stream;
use std::time::{Duration, Instant};

pub(super) struct Upload<B: RecvBody> {
    recv: B,
    /// The first part, read before a server was chosen.
    first: Vec<u8>,
    /// The client's `Content-Length`.
    declared: Option<u64>,
    received: u64,
    /// `max_request_body` (0: none): a body that grows past it is refused (413).
    limit: u64,
    ended: bool,
    streamed: bool,
    /// Data read past what a server asked for (`more`).
    pending: Bytes,
}

impl<B: RecvBody> Upload<B> {
    pub fn new(recv: B, declared: Option<u64>, limit: u64) -> Self {
        Upload {
            ended: recv.is_end_stream(),
            recv,
            first: Vec::new(),
            declared,
            received: 0,
            limit,
            streamed: false,
            pending: Bytes::new(),
        }
    }

    /// Nothing is left to read from the client.
    pub fn is_done(&self) -> bool {
        self.ended
    }

    /// Part of the body went to a server past its first part: it cannot go again.
    pub fn streamed(&self) -> bool {
        self.streamed
    }

    /// The part read before a server was chosen.
    pub fn first(&self) -> &[u8] {
        &self.first
    }

    /// The body's next data after the first part, for a server that asks for it (AJP): up
    /// to `want` bytes in `out` (cleared; empty at the body's end). What a DATA frame
    /// brought past `want` waits for the next call. From here on the request is not sent
    /// again.
    pub async fn more(
        &mut self,
        want: usize,
        limits: &ListenerLimits,
        since: Instant,
        out: &mut Vec<u8>,
    ) -> Result<(), Stop> {
        self.streamed = true;
        out.clear();
        while self.pending.is_empty() {
            match self.next(limits, since).await? {
                Some(data) => self.pending = data,
                None => return Ok(()),
            }
        }
        let k = want.max(1).min(self.pending.len());
        out.extend_from_slice(&self.pending.split_to(k));
        Ok(())
    }

    /// How the body is framed for the server.
    pub fn body(&self) -> Body {
        match (self.declared, self.ended) {
            (Some(n), _) => Body::Length(n),
            (None, true) if self.first.is_empty() => Body::Empty,
            (None, true) => Body::Length(self.first.len() as u64),
            (None, false) => Body::Chunked,
        }
    }

    /// Reads the body, or its first `request_buffer` bytes.
    pub async fn read_first(
        &mut self,
        limits: &ListenerLimits,
        since: Instant,
    ) -> Result<(), Stop> {
        while !self.ended && self.first.len() < limits.request_buffer {
            if let Some(data) = self.next(limits, since).await? {
                self.first.extend_from_slice(&data);
            }
        }
        Ok(())
    }

    /// The first part, framed for the server, after the head in `out`.
    pub fn first_part(&self, out: &mut Vec<u8>) {
        if self.first.is_empty() {
            return;
        }
        if self.body() == Body::Chunked {
            chunk(out, &self.first);
        } else {
            out.extend_from_slice(&self.first);
        }
    }

    /// Sends the rest of the body to the server, each write within `write_timeout`.
    pub async fn stream(
        &mut self,
        up: &mut Stream,
        limits: &ListenerLimits,
        since: Instant,
        write_timeout: Duration,
    ) -> Result<(), Failure> {
        let chunked = self.body() == Body::Chunked;
        self.streamed = true;
        let mut framed = Vec::new();
        loop {
            let data = self.next(limits, since).await.map_err(Failure::Body)?;
            framed.clear();
            match &data {
                Some(data) if chunked => chunk(&mut framed, data),
                Some(data) => framed.extend_from_slice(data),
                None if chunked => framed.extend_from_slice(LAST_CHUNK),
                None => {}
            }
            if !framed.is_empty() {
                crate::pipeline::upstream::write_all(up, &framed, write_timeout)
                    .await
                    .map_err(|_| Failure::Upstream(502, "writing the request body failed"))?;
            }
            if data.is_none() {
                return Ok(());
            }
        }
    }

    /// A tunnel's next bytes from the client (`None` at the stream's end), its window
    /// given back. No body rate: a tunnel is bounded by its idle timeout alone.
    pub async fn tunnel_data(&mut self) -> Option<Result<Bytes, Gone>> {
        if self.ended {
            return None;
        }
        match self.recv.data().await {
            Some(Ok(data)) => {
                self.recv.release(data.len());
                self.ended = self.recv.is_end_stream();
                Some(Ok(data))
            }
            Some(Err(e)) => Some(Err(e)),
            None => {
                self.ended = true;
                None
            }
        }
    }

    /// The body's next data (`None` at its end), within the listener's body rate.
    async fn next(
        &mut self,
        limits: &ListenerLimits,
        since: Instant,
    ) -> Result<Option<Bytes>, Stop> {
        if self.ended {
            return Ok(None);
        }
        let left = crate::front::proxy::body_time_left(limits, since.elapsed(), self.received)
            .ok_or(Stop::TooSlow)?;
        match crate::base::poll_time::timeout(left, self.recv.data()).await {
            Err(_) => Err(Stop::TooSlow),
            Ok(None) => {
                self.ended = true;
                Ok(None)
            }
            Ok(Some(Err(_))) => Err(Stop::Closed),
            Ok(Some(Ok(data))) => {
                self.received += data.len() as u64;
                if self.limit > 0 && self.received > self.limit {
                    return Err(Stop::Refused(Refusal {
                        status: 413,
                        why: crate::pipeline::TOO_LARGE,
                    }));
                }
                self.recv.release(data.len());
                self.ended = self.recv.is_end_stream();
                Ok(Some(data))
            }
        }
    }
}
