//! The client connection's reads, bounded while a request head is being read: Pingora's
//! HTTP/1 parser buffers an unfinished head up to 1 MiB per connection (a constant), so a
//! few hundred clients sending endless headers would hold hundreds of MiB. Here a head
//! may take at most `max_request_head` bytes of reads; past that, tether answers 431 on
//! the connection itself and ends it, and Pingora sees the client close.
//!
//! The budget is set before each request and lifted when the head is read (the body is
//! not a head). Everything else (writes, digests, peer addresses) goes to the stream.
//!
//! For the lean HTTP/1 path, the stream can also keep a copy of what a head's reads
//! returned ([`HeadLimited::recording`]), so that a request the lean path does not take is
//! handed to Pingora's proxy as if it had not been read yet.

use async_trait::async_trait;
use bytes::BytesMut;
use pingora_core::protocols::raw_connect::ProxyDigest;
use pingora_core::protocols::{
    tls::TlsRef, GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest,
    Ssl, Stream, TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// No limit: the head was read.
const UNLIMITED: usize = usize::MAX;

/// The answer to a head over the limit (written once, on the connection itself).
const TOO_LARGE: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 36\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large\n";

/// Bytes the current request head may still read; shared by the connection's stream and
/// its request loop.
#[derive(Debug, Default)]
pub struct HeadBudget {
    left: AtomicUsize,
    /// Set once a head ran over (for the metric).
    exceeded: std::sync::atomic::AtomicBool,
    /// Counts heads (`start` calls): a recording stream starts afresh with each.
    head: AtomicU64,
}

impl HeadBudget {
    /// A new head is expected: it may read `max` bytes.
    pub fn start(&self, max: usize) {
        self.left.store(max, Relaxed);
        self.head.fetch_add(1, Relaxed);
    }

    /// The head was read: the body is read without this limit.
    pub fn lift(&self) {
        self.left.store(UNLIMITED, Relaxed);
    }

    pub fn is_lifted(&self) -> bool {
        self.left.load(Relaxed) == UNLIMITED
    }

    /// Did a head run over the limit (once; resets the flag)?
    pub fn take_exceeded(&self) -> bool {
        self.exceeded.swap(false, Relaxed)
    }
}

#[derive(Debug)]
pub struct HeadLimited {
    inner: Stream,
    budget: Arc<HeadBudget>,
    /// How much of `TOO_LARGE` is written.
    answered: usize,
    /// With `recording`: what the current head's reads returned, and which head that is.
    record: Option<(BytesMut, u64)>,
}

impl HeadLimited {
    pub fn new(inner: Stream, budget: Arc<HeadBudget>) -> Self {
        HeadLimited {
            inner,
            budget,
            answered: 0,
            record: None,
        }
    }

    /// Keeps a copy of what each head's reads return, for [`Self::stop_recording`].
    pub fn recording(mut self) -> Self {
        self.record = Some((BytesMut::new(), 0));
        self
    }

    /// Everything the current head's reads returned (the head, and whatever came with
    /// it); recording ends (the connection is handed to Pingora's proxy for good).
    pub fn stop_recording(&mut self) -> BytesMut {
        let head = self.budget.head.load(Relaxed);
        match self.record.take() {
            Some((bytes, of)) if of == head => bytes,
            _ => BytesMut::new(),
        }
    }
}

impl AsyncRead for HeadLimited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let left = self.budget.left.load(Relaxed);
        if left == UNLIMITED {
            return Pin::new(&mut *self.inner).poll_read(cx, buf);
        }
        if left == 0 {
            // Over the limit: answer 431 (the socket's buffer takes these few bytes at
            // once; a client that does not read them just gets the close) and end.
            self.budget.exceeded.store(true, Relaxed);
            while self.answered < TOO_LARGE.len() {
                let at = self.answered;
                match Pin::new(&mut *self.inner).poll_write(cx, &TOO_LARGE[at..]) {
                    Poll::Ready(Ok(n)) if n > 0 => self.answered += n,
                    _ => break,
                }
            }
            let _ = Pin::new(&mut *self.inner).poll_flush(cx);
            return Poll::Ready(Ok(()));
        }
        // Read at most what the budget allows.
        let room = buf.remaining().min(left);
        let mut limited = buf.take(room);
        let before = limited.filled().len();
        let poll = Pin::new(&mut *self.inner).poll_read(cx, &mut limited);
        let n = limited.filled().len() - before;
        if n > 0 {
            // SAFETY: `limited` wrote `n` initialised bytes into `buf`'s unfilled part.
            unsafe { buf.assume_init(n) };
            buf.advance(n);
            self.budget.left.fetch_sub(n, Relaxed);
            let head = self.budget.head.load(Relaxed);
            if let Some((bytes, of)) = &mut self.record {
                if *of != head {
                    bytes.clear();
                    *of = head;
                }
                let filled = buf.filled();
                bytes.extend_from_slice(&filled[filled.len() - n..]);
            }
        }
        poll
    }
}

impl AsyncWrite for HeadLimited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[async_trait]
impl Shutdown for HeadLimited {
    async fn shutdown(&mut self) {
        self.inner.shutdown().await
    }
}

impl UniqueID for HeadLimited {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

impl Ssl for HeadLimited {
    fn get_ssl(&self) -> Option<&TlsRef> {
        self.inner.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<pingora_core::protocols::tls::SslDigest>> {
        self.inner.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.inner.selected_alpn_proto()
    }
}

#[async_trait]
impl Peek for HeadLimited {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        self.inner.try_peek(buf).await
    }
}

impl GetTimingDigest for HeadLimited {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.inner.get_timing_digest()
    }

    fn get_read_pending_time(&self) -> std::time::Duration {
        self.inner.get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> std::time::Duration {
        self.inner.get_write_pending_time()
    }
}

impl GetProxyDigest for HeadLimited {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.inner.get_proxy_digest()
    }

    fn set_proxy_digest(&mut self, digest: ProxyDigest) {
        self.inner.set_proxy_digest(digest)
    }
}

impl GetSocketDigest for HeadLimited {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.inner.get_socket_digest()
    }

    fn set_socket_digest(&mut self, digest: SocketDigest) {
        self.inner.set_socket_digest(digest)
    }
}
