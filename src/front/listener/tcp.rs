//! A client's TCP connection as tether's own accept loop hands it on: the socket and its
//! peer's address, and nothing else while the connection lives. Pingora's accept wraps
//! each socket in its `l4::Stream` (384 bytes) with a `SocketDigest` (448), a third of an
//! idle engine connection's memory; here the digest is made only if something asks for it
//! (a request handed to pingora-proxy), and the connections that take Pingora's paths from
//! their start (TLS, the PROXY header, h2c) become an `l4::Stream` at once
//! ([`into_l4`]).

use async_trait::async_trait;
use pingora_core::protocols::l4::socket::SocketAddr as PingoraAddr;
use pingora_core::protocols::l4::stream::Stream as L4Stream;
use pingora_core::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl, Stream,
    TimingDigest, UniqueID, UniqueIDType,
};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

#[derive(Debug)]
pub struct TcpClient {
    io: TcpStream,
    peer: SocketAddr,
    /// Pingora's view of the socket, made the first time it is asked for.
    digest: OnceLock<Arc<SocketDigest>>,
}

impl TcpClient {
    pub fn new(io: TcpStream, peer: SocketAddr) -> TcpClient {
        TcpClient {
            io,
            peer,
            digest: OnceLock::new(),
        }
    }

    /// The socket and the peer's address (the digest, if one was made, is dropped).
    pub fn into_parts(self) -> (TcpStream, SocketAddr) {
        (self.io, self.peer)
    }

    fn digest(&self) -> Arc<SocketDigest> {
        self.digest
            .get_or_init(|| Arc::new(digest_of(self.io.as_raw_fd(), self.peer)))
            .clone()
    }
}

/// Pingora's digest of an accepted socket, as its own accept fills it (the peer's address
/// known, the local one looked up when asked).
fn digest_of(fd: i32, peer: SocketAddr) -> SocketDigest {
    let digest = SocketDigest::from_raw_fd(fd);
    let _ = digest.peer_addr.set(Some(PingoraAddr::from(peer)));
    digest
}

/// The stream as Pingora's accept would have made it (unbuffered, as tether's engine
/// listeners ask): for the paths that need Pingora's own type. Other streams unchanged.
pub fn into_l4(stream: Stream) -> Stream {
    if stream.as_any().downcast_ref::<TcpClient>().is_none() {
        return stream;
    }
    let Ok(client) = stream.into_any().downcast::<TcpClient>() else {
        unreachable!("checked above");
    };
    let TcpClient { io, peer, .. } = *client;
    let fd = io.as_raw_fd();
    let mut l4 = L4Stream::from(io);
    l4.set_socket_digest(digest_of(fd, peer));
    Box::new(l4)
}

/// The client's address and the local one a new connection came to (`local` asks the
/// kernel).
pub fn addresses(stream: &Stream) -> (Option<SocketAddr>, Option<SocketAddr>) {
    if let Some(client) = stream.as_any().downcast_ref::<TcpClient>() {
        return (Some(client.peer), client.io.local_addr().ok());
    }
    let socket = stream.get_socket_digest();
    let peer = socket
        .as_ref()
        .and_then(|d| d.peer_addr().and_then(|a| a.as_inet()).copied());
    let local = socket
        .as_ref()
        .and_then(|d| d.local_addr().and_then(|a| a.as_inet()).copied());
    (peer, local)
}

/// The client's IP address, without making a digest for it.
pub fn peer_ip(stream: &Stream) -> Option<IpAddr> {
    if let Some(client) = stream.as_any().downcast_ref::<TcpClient>() {
        return Some(client.peer.ip());
    }
    stream
        .get_socket_digest()
        .and_then(|d| d.peer_addr().and_then(|a| a.as_inet()).map(|a| a.ip()))
}

impl AsyncRead for TcpClient {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for TcpClient {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[async_trait]
impl Shutdown for TcpClient {
    async fn shutdown(&mut self) {
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut self.io).await;
    }
}

impl UniqueID for TcpClient {
    fn id(&self) -> UniqueIDType {
        self.io.as_raw_fd()
    }
}

impl Ssl for TcpClient {}

/// Peeking is not offered (h2c listeners take [`into_l4`]'s stream, which rewinds).
#[async_trait]
impl Peek for TcpClient {}

impl GetTimingDigest for TcpClient {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        Vec::new()
    }
}

impl GetProxyDigest for TcpClient {
    fn get_proxy_digest(&self) -> Option<Arc<pingora_core::protocols::raw_connect::ProxyDigest>> {
        None
    }
}

impl GetSocketDigest for TcpClient {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        Some(self.digest())
    }

    fn set_socket_digest(&mut self, digest: SocketDigest) {
        self.digest = OnceLock::from(Arc::new(digest));
    }
}
