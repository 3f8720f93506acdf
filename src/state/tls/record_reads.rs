//! The socket under a client's TLS connection, read through a buffer its thread lends it
//! while a record is partly read, so an idle connection holds none.
//!
//! BoringSSL reads a record's 5-byte header, then its body: unbuffered, that is two
//! `recv`s per record; through a buffer, one `recv` takes both and often the next records.
//! A buffer owned by each connection would be held for its whole life, idle or not (one
//! record of any TLS version needs 20 KiB, most of it resident once the allocator hands out
//! pages used before). Here a read borrows the thread's spare buffer, and gives it back as
//! soon as what it read is used up, or when nothing came. Each connection's task runs on
//! one thread, and a connection keeps its buffer only between two reads of the same
//! records, so a thread needs few spares.

use async_trait::async_trait;
use pingora_core::protocols::l4::stream::Stream as L4Stream;
use pingora_core::protocols::raw_connect::ProxyDigest;
use pingora_core::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl,
    TimingDigest, UniqueID, UniqueIDType,
};
use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One record of any TLS version (16 KiB of data, up to 2 KiB of expansion, the 5-byte
/// header) fits; 20 KiB is also one of jemalloc's size classes.
const SIZE: usize = 20 * 1024;

/// Spare buffers a thread keeps; more are freed.
const KEPT: usize = 8;

thread_local! {
    static SPARE: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
}

fn borrow() -> Box<[u8]> {
    SPARE
        .with(|s| s.borrow_mut().pop())
        .unwrap_or_else(|| vec![0; SIZE].into_boxed_slice())
}

fn give_back(buf: Box<[u8]>) {
    SPARE.with(|s| {
        let mut spare = s.borrow_mut();
        if spare.len() < KEPT {
            spare.push(buf);
        }
    });
}

/// The client's socket (Pingora's stream, unbuffered) and the bytes read but not yet
/// taken, in a borrowed buffer.
#[derive(Debug)]
pub struct RecordReads {
    inner: L4Stream,
    buf: Option<Box<[u8]>>,
    pos: usize,
    end: usize,
}

impl RecordReads {
    pub fn new(inner: L4Stream) -> RecordReads {
        RecordReads {
            inner,
            buf: None,
            pos: 0,
            end: 0,
        }
    }

    /// How many spare buffers this thread holds (for tests).
    pub fn spares() -> usize {
        SPARE.with(|s| s.borrow().len())
    }

    /// Whether this connection holds a buffer now (for tests).
    pub fn holds_buffer(&self) -> bool {
        self.buf.is_some()
    }
}

impl Drop for RecordReads {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            give_back(buf);
        }
    }
}

impl AsyncRead for RecordReads {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.buf.is_none() {
            // A read as large as the buffer gains nothing from it.
            if out.remaining() >= SIZE || out.remaining() == 0 {
                return Pin::new(&mut this.inner).poll_read(cx, out);
            }
            let mut buf = borrow();
            let mut read = ReadBuf::new(&mut buf);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if !read.filled().is_empty() => {
                    this.end = read.filled().len();
                    this.pos = 0;
                    this.buf = Some(buf);
                }
                other => {
                    give_back(buf);
                    return other;
                }
            }
        }
        let Some(buf) = this.buf.as_ref() else {
            unreachable!("filled above");
        };
        let n = out.remaining().min(this.end - this.pos);
        out.put_slice(&buf[this.pos..this.pos + n]);
        this.pos += n;
        if this.pos == this.end {
            if let Some(buf) = this.buf.take() {
                give_back(buf);
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for RecordReads {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[async_trait]
impl Shutdown for RecordReads {
    async fn shutdown(&mut self) {
        self.inner.shutdown().await;
    }
}

impl UniqueID for RecordReads {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

impl Ssl for RecordReads {}

/// Peeking is not offered: a TLS stream does not peek at its socket.
#[async_trait]
impl Peek for RecordReads {}

impl GetTimingDigest for RecordReads {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.inner.get_timing_digest()
    }
}

impl GetProxyDigest for RecordReads {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.inner.get_proxy_digest()
    }
}

impl GetSocketDigest for RecordReads {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.inner.get_socket_digest()
    }

    fn set_socket_digest(&mut self, digest: SocketDigest) {
        self.inner.set_socket_digest(digest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn pair() -> (RecordReads, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        let server = L4Stream::from(accepted.unwrap().0);
        (RecordReads::new(server), client.unwrap())
    }

    #[tokio::test(flavor = "current_thread")]
    async fn small_reads_share_one_recv_and_the_buffer_goes_back_when_used_up() {
        let (mut reads, mut peer) = pair().await;
        let sent: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        peer.write_all(&sent).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        // A record's header, then its body: the first read takes everything that came.
        let mut header = [0u8; 5];
        reads.read_exact(&mut header).await.unwrap();
        assert_eq!(&header, &sent[..5]);
        assert!(reads.holds_buffer(), "the rest waits in the buffer");
        let spares = RecordReads::spares();
        let mut body = vec![0u8; sent.len() - 5];
        reads.read_exact(&mut body).await.unwrap();
        assert_eq!(body, &sent[5..]);
        assert!(!reads.holds_buffer(), "used up: given back");
        assert_eq!(RecordReads::spares(), spares + 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_read_that_waits_holds_no_buffer_and_the_end_is_seen() {
        let (mut reads, mut peer) = pair().await;
        let mut one = [0u8; 5];
        let waiting = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            reads.read_exact(&mut one),
        )
        .await;
        assert!(waiting.is_err(), "nothing was sent");
        assert!(!reads.holds_buffer());
        peer.write_all(b"hello").await.unwrap();
        peer.shutdown().await.unwrap();
        let mut all = Vec::new();
        reads.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"hello");
        assert!(!reads.holds_buffer());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn writes_go_through() {
        let (mut reads, mut peer) = pair().await;
        reads.write_all(b"ping").await.unwrap();
        reads.flush().await.unwrap();
        let mut got = [0u8; 4];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
    }
}
