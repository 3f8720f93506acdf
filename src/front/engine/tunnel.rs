//! An upgraded connection (a WebSocket after its `101`), relayed byte for byte both ways
//! until both sides have ended. tether writes nothing of its own into it: a side's end
//! (FIN, or TLS close_notify) is passed on as an end of the other's write side, the other
//! direction going on; a side that fails (a reset) has what it had sent delivered, then
//! the other side is closed. Only `tunnel_idle_timeout` bounds it: no byte either way for
//! that long closes both.

use pingora_core::protocols::Stream;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::ReadBuf;

/// How long a side that is being closed (its peer failed, or the tunnel was idle too
/// long) may take to end its own half while what it still sends is read and dropped: a
/// socket closed with unread bytes resets, and a reset can discard the last bytes sent
/// to it before they were read.
const LINGER: Duration = Duration::from_secs(5);

pub use crate::metrics::TunnelEnded as Ended;

/// Bytes on their way from one side to the other: `buf[pos..cap]` is read and not written
/// yet.
pub struct Half<'a> {
    buf: &'a mut [u8],
    pos: usize,
    cap: usize,
    /// The source ended its half.
    read_done: bool,
    /// The end was passed on (the destination's write side is shut).
    done: bool,
}

impl<'a> Half<'a> {
    /// A direction whose buffer holds `buf[pos..cap]` already (bytes that came with the
    /// upgrade's head).
    pub fn new(buf: &'a mut [u8], pos: usize, cap: usize) -> Self {
        Half {
            buf,
            pos,
            cap,
            read_done: false,
            done: false,
        }
    }
}

/// Which side failed.
enum Failed {
    Source,
    Destination,
}

/// Moves bytes from `from` to `to` until `from` ends (`Ready(Ok)`, the end passed on),
/// one fails, or it must wait; `moved` is set when a byte was read or written.
fn poll_half(
    cx: &mut Context<'_>,
    half: &mut Half<'_>,
    from: &mut Stream,
    to: &mut Stream,
    moved: &mut bool,
) -> Poll<Result<(), Failed>> {
    loop {
        // A read only into an empty buffer: a source that fails then has nothing of its
        // own left unwritten.
        if half.pos == half.cap && !half.read_done {
            let mut read = ReadBuf::new(half.buf);
            match ready!(Pin::new(&mut **from).poll_read(cx, &mut read)) {
                Ok(()) if read.filled().is_empty() => half.read_done = true,
                Ok(()) => {
                    half.cap = read.filled().len();
                    half.pos = 0;
                    *moved = true;
                }
                Err(_) => return Poll::Ready(Err(Failed::Source)),
            }
        }
        while half.pos < half.cap {
            let bytes = &half.buf[half.pos..half.cap];
            match ready!(Pin::new(&mut **to).poll_write(cx, bytes)) {
                Ok(0) | Err(_) => return Poll::Ready(Err(Failed::Destination)),
                Ok(n) => {
                    half.pos += n;
                    *moved = true;
                }
            }
        }
        if ready!(Pin::new(&mut **to).poll_flush(cx)).is_err() {
            return Poll::Ready(Err(Failed::Destination));
        }
        if half.read_done {
            // An error here is the destination's failure, seen by its own reads next.
            let _ = ready!(Pin::new(&mut **to).poll_shutdown(cx));
            half.done = true;
            return Poll::Ready(Ok(()));
        }
    }
}

/// Relays between `client` and `server` until the tunnel ends: `up` carries the client's
/// bytes (its buffer may hold some already), `down` the server's.
pub async fn run(
    client: &mut Stream,
    server: &mut Stream,
    mut up: Half<'_>,
    mut down: Half<'_>,
    idle: Duration,
) -> Ended {
    let sleep = tokio::time::sleep_until((crate::base::poll_time::now() + idle).into());
    tokio::pin!(sleep);
    let ended = poll_fn(|cx| {
        let mut moved = false;
        if !up.done {
            if let Poll::Ready(Err(failed)) = poll_half(cx, &mut up, client, server, &mut moved) {
                return Poll::Ready(match failed {
                    Failed::Source => Ended::ClientFailed,
                    Failed::Destination => Ended::ServerFailed,
                });
            }
        }
        if !down.done {
            if let Poll::Ready(Err(failed)) = poll_half(cx, &mut down, server, client, &mut moved) {
                return Poll::Ready(match failed {
                    Failed::Source => Ended::ServerFailed,
                    Failed::Destination => Ended::ClientFailed,
                });
            }
        }
        if up.done && down.done {
            return Poll::Ready(Ended::Closed);
        }
        if moved {
            sleep
                .as_mut()
                .reset((crate::base::poll_time::now() + idle).into());
        }
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Ended::Idle),
            Poll::Pending => Poll::Pending,
        }
    })
    .await;
    match ended {
        Ended::Closed => {}
        // What the failed side sent before it failed was written; the server's bytes that
        // were read and not written yet go to the client before its side is closed.
        Ended::ServerFailed => close(client, &down.buf[down.pos..down.cap], up.buf).await,
        Ended::ClientFailed => close(server, &up.buf[up.pos..up.cap], down.buf).await,
        Ended::Idle => {
            let _ = poll_fn(|cx| Pin::new(&mut **server).poll_shutdown(cx)).await;
            let _ = poll_fn(|cx| Pin::new(&mut **client).poll_shutdown(cx)).await;
        }
    }
    ended
}

/// Closes the side whose peer failed: `pending` written to it, its write side shut, then
/// what it still sends read and dropped into `spare` until it ends its half (within
/// [`LINGER`]).
async fn close(side: &mut Stream, pending: &[u8], spare: &mut [u8]) {
    let _ = crate::base::poll_time::timeout(LINGER, async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        side.write_all(pending).await?;
        side.flush().await?;
        side.shutdown().await?;
        while side.read(spare).await? > 0 {}
        Ok::<(), io::Error>(())
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use pingora_core::protocols::l4::stream::Stream as L4;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// A connected pair: tether's end as a Pingora stream, the peer's as a socket.
    async fn pair() -> (Stream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (ours, theirs) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (Box::new(L4::from(ours.unwrap())), theirs.unwrap().0)
    }

    async fn tunnel(idle: Duration) -> (TcpStream, TcpStream, tokio::task::JoinHandle<Ended>) {
        let (mut client, client_peer) = pair().await;
        let (mut server, server_peer) = pair().await;
        let task = tokio::spawn(async move {
            let (mut a, mut b) = (vec![0u8; 1024], vec![0u8; 1024]);
            a[..5].copy_from_slice(b"early");
            let up = Half::new(&mut a, 0, 5);
            let down = Half::new(&mut b, 0, 0);
            run(&mut client, &mut server, up, down, idle).await
        });
        (client_peer, server_peer, task)
    }

    #[tokio::test]
    async fn a_half_close_is_passed_on_and_the_other_way_goes_on() {
        let (mut client, mut server, task) = tunnel(Duration::from_secs(30)).await;
        let mut got = [0u8; 5];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"early", "the bytes read with the head go first");
        client.write_all(b"last words").await.unwrap();
        client.shutdown().await.unwrap();
        let mut rest = Vec::new();
        server.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"last words", "then the client's FIN, as a FIN");
        server.write_all(b"the answer after it").await.unwrap();
        server.shutdown().await.unwrap();
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"the answer after it");
        assert_eq!(task.await.unwrap(), Ended::Closed);
    }

    #[tokio::test]
    async fn a_server_reset_delivers_what_it_sent_then_closes_the_client() {
        let (mut client, server, task) = tunnel(Duration::from_secs(30)).await;
        let mut server = server;
        server.write_all(b"close frame").await.unwrap();
        // Unread bytes and a zero linger: the kernel resets.
        let mut got = [0u8; 5];
        server.read_exact(&mut got).await.unwrap();
        client.write_all(b"unread").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // A zero linger does not block the drop (what the deprecation warns of).
        #[allow(deprecated)]
        server.set_linger(Some(Duration::ZERO)).unwrap();
        drop(server);
        let mut all = Vec::new();
        client.read_to_end(&mut all).await.unwrap();
        assert_eq!(
            all, b"close frame",
            "nothing but the server's bytes, then a FIN"
        );
        drop(client);
        assert_eq!(task.await.unwrap(), Ended::ServerFailed);
    }

    #[tokio::test]
    async fn an_idle_tunnel_closes_both_sides() {
        let (mut client, mut server, task) = tunnel(Duration::from_millis(300)).await;
        let mut got = [0u8; 5];
        server.read_exact(&mut got).await.unwrap();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        server.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        assert_eq!(task.await.unwrap(), Ended::Idle);
    }
}
