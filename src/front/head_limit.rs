//! The client connection's reads, bounded while a request head is being read: Pingora's
//! HTTP/1 parser buffers an unfinished head up to 1 MiB per connection (a constant), so a
//! few hundred clients sending endless headers would hold hundreds of MiB. Here a head
//! may take at most `max_request_head` bytes of reads; past that, tether answers 431 on
//! the connection itself and ends it, and Pingora sees the client close.
//!
//! The budget is set before each request and lifted when the head is read (the body is
//! not a head). Everything else (writes, digests, peer addresses) goes to the stream.
//!
//! While a body is read before a server is connected (`proxy/body.rs`), the reads can be
//! capped in total ([`HeadBudget::cap`]), so that Pingora's 64 KiB retry buffer, which
//! keeps that part of the body, never overflows. And the connection's socket can be told
//! to close with a reset ([`HeadBudget::reset_on_close`]).
//!
//! The listener sets a connection's budget as a task-local ([`HEAD`]) for all its
//! requests; whichever engine serves a request lifts it ([`head_read`]) and reads it.

use async_trait::async_trait;
use pingora_core::protocols::raw_connect::ProxyDigest;
use pingora_core::protocols::{
    tls::TlsRef, GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest,
    Ssl, Stream, TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering::Relaxed};
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
    /// Bytes the next reads may return in all, once the head is read; 0: no cap.
    cap: AtomicUsize,
    /// Since when (`now_ms() + 1`) a read has been waiting for the client; 0: none is.
    pending_since: AtomicU64,
    /// Milliseconds reads have waited for the client since the head was read.
    waited_ms: AtomicU64,
    /// The client's TCP socket (0: unknown).
    fd: AtomicI32,
}

impl HeadBudget {
    /// A new head is expected: it may read `max` bytes.
    pub fn start(&self, max: usize) {
        self.left.store(max, Relaxed);
    }

    /// The head was read: the body is read without this limit, and the time reads wait for
    /// the client is counted from now.
    pub fn lift(&self) {
        self.left.store(UNLIMITED, Relaxed);
        self.pending_since.store(0, Relaxed);
        self.waited_ms.store(0, Relaxed);
    }

    /// A read returned: `pending` when it waits for the client. Only the time from a read's
    /// first wait to its data counts; a read that finds data at once waited for nothing (a
    /// server that is slow to take the body stops tether's reads, not the client's sends).
    fn timed(&self, pending: bool) {
        let since = self.pending_since.load(Relaxed);
        if pending {
            if since == 0 {
                self.pending_since
                    .store(crate::routing::now_ms() + 1, Relaxed);
            }
        } else if since != 0 {
            let waited = (crate::routing::now_ms() + 1).saturating_sub(since);
            self.waited_ms.fetch_add(waited, Relaxed);
            self.pending_since.store(0, Relaxed);
        }
    }

    /// How long reads have waited for the client since the head was read (a read waiting
    /// now included).
    pub fn client_wait(&self) -> std::time::Duration {
        let since = self.pending_since.load(Relaxed);
        let now = if since == 0 {
            0
        } else {
            (crate::routing::now_ms() + 1).saturating_sub(since)
        };
        std::time::Duration::from_millis(self.waited_ms.load(Relaxed) + now)
    }

    pub fn is_lifted(&self) -> bool {
        self.left.load(Relaxed) == UNLIMITED
    }

    /// Did a head run over the limit (once; resets the flag)?
    pub fn take_exceeded(&self) -> bool {
        self.exceeded.swap(false, Relaxed)
    }

    /// The next reads return `total` bytes in all at most (`None`: no cap). A read never
    /// returns 0 bytes for the cap: at least one byte is let through.
    pub fn cap(&self, total: Option<usize>) {
        self.cap.store(total.unwrap_or(0), Relaxed);
    }

    /// The client's socket, for [`Self::reset_on_close`].
    pub fn set_fd(&self, fd: i32) {
        self.fd.store(fd, Relaxed);
    }

    /// When the connection closes, it is reset (`SO_LINGER` 0): what the kernel still holds
    /// for a client that stopped reading is dropped at once, instead of the socket lingering
    /// with megabytes queued behind its FIN (nginx `reset_timedout_connection`).
    pub fn reset_on_close(&self) {
        let fd = self.fd.load(Relaxed);
        if fd <= 0 {
            return;
        }
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: `fd` is this connection's socket, open while its task runs (the task is
        // what calls this); the option value is a valid `linger` of the size given.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            );
        }
    }
}

tokio::task_local! {
    /// The connection's head budget, lifted by the proxy once the request's head is read.
    pub static HEAD: Arc<HeadBudget>;
}

/// Called by the proxy in its first phase: the head arrived in time and within its size.
pub fn head_read() {
    let _ = HEAD.try_with(|h| h.lift());
}

/// Caps what the connection's next reads return, in all (`None`: no cap); a no-op on
/// HTTP/2 (`proxy/body.rs`).
pub fn cap_reads(total: Option<usize>) {
    let _ = HEAD.try_with(|h| h.cap(total));
}

/// How long this request's reads have waited for the client since its head was read;
/// `None` on HTTP/2 (there, the time since the head is the measure).
pub fn client_wait() -> Option<std::time::Duration> {
    HEAD.try_with(|h| h.client_wait()).ok()
}

/// The connection will be reset when it closes, dropping what the kernel still queues for
/// the client (a client too slow to read); a no-op on HTTP/2.
pub fn reset_on_close() {
    let _ = HEAD.try_with(|h| h.reset_on_close());
}

#[derive(Debug)]
pub struct HeadLimited {
    inner: Stream,
    budget: Arc<HeadBudget>,
    /// How much of `TOO_LARGE` is written.
    answered: usize,
}

impl HeadLimited {
    pub fn new(inner: Stream, budget: Arc<HeadBudget>) -> Self {
        HeadLimited {
            inner,
            budget,
            answered: 0,
        }
    }

    /// The stream under the limit.
    pub fn inner(&self) -> &Stream {
        &self.inner
    }

    pub fn into_inner(self) -> Stream {
        self.inner
    }
}

impl AsyncRead for HeadLimited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // Only a body's reads are timed (the head has its own deadline).
        let body = self.budget.is_lifted();
        let poll = self.as_mut().read_bounded(cx, buf);
        if body {
            self.budget.timed(poll.is_pending());
        }
        poll
    }
}

impl HeadLimited {
    /// A read within the head budget, or within the body cap.
    fn read_bounded(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let left = self.budget.left.load(Relaxed);
        if left == UNLIMITED {
            let cap = self.budget.cap.load(Relaxed);
            if cap == 0 {
                return Pin::new(&mut *self.inner).poll_read(cx, buf);
            }
            let mut limited = buf.take(cap.max(1));
            let poll = Pin::new(&mut *self.inner).poll_read(cx, &mut limited);
            let n = limited.filled().len();
            if n > 0 {
                // SAFETY: `limited` wrote `n` initialised bytes into `buf`'s unfilled part.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                // At least one byte stays allowed (0 would mean "no cap").
                self.budget.cap.store(cap.saturating_sub(n).max(1), Relaxed);
            }
            return poll;
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
