//! The idle server connections of one thread, by server (Pingora's peer reuse hash: the
//! address, TLS, SNI and verification): a request takes the most recently used one and
//! gives it back when its answer ended cleanly. A thread-local table, so no lock and no
//! task per connection; it is touched only between awaits.

use pingora_core::protocols::Stream;
use std::cell::RefCell;
use std::collections::HashMap;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};
use tokio::io::ReadBuf;

struct Idle {
    stream: Stream,
    since: Instant,
}

thread_local! {
    static IDLE: RefCell<HashMap<u64, Vec<Idle>>> = RefCell::new(HashMap::new());
}

/// An idle connection to the server `key` names, used less than `idle_timeout` before
/// `now` (the caller's reading of the clock: reading it costs, and a request reads it
/// once for what it times) and not closed by the server meanwhile.
pub fn take(key: u64, idle_timeout: Duration, now: Instant) -> Option<(Stream, Duration)> {
    loop {
        let mut idle = IDLE.with(|p| p.borrow_mut().get_mut(&key)?.pop())?;
        let waited = now.saturating_duration_since(idle.since);
        if waited < idle_timeout && is_open(&mut idle.stream) {
            return Some((idle.stream, waited));
        }
        // Closed or too old: dropped, and the next one is looked at.
    }
}

/// Keeps `stream` for the next request to server `key`; past `most` idle connections to
/// it, the oldest is closed. Ones past `idle_timeout` are closed on the way. The clock is
/// read once, however many connections are idle.
pub fn put(key: u64, stream: Stream, most: usize, idle_timeout: Duration) {
    put_at(
        key,
        stream,
        most,
        idle_timeout,
        crate::base::poll_time::now(),
    );
}

fn put_at(key: u64, stream: Stream, most: usize, idle_timeout: Duration, now: Instant) {
    IDLE.with(|p| {
        let mut pool = p.borrow_mut();
        let idle = pool.entry(key).or_default();
        idle.retain(|i| now.saturating_duration_since(i.since) < idle_timeout);
        if idle.len() >= most.max(1) {
            idle.remove(0);
        }
        idle.push(Idle { stream, since: now });
    });
}

/// Is an idle connection still open? A read that would wait says so; an end, an error or
/// bytes nobody asked for say the connection is no use. (TLS records that carry no data,
/// a session ticket, are read and kept by the stream.)
fn is_open(stream: &mut Stream) -> bool {
    let mut byte = [0u8; 1];
    let mut buf = ReadBuf::new(&mut byte);
    let mut cx = Context::from_waker(Waker::noop());
    std::pin::Pin::new(&mut **stream)
        .poll_read(&mut cx, &mut buf)
        .is_pending()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::{TcpListener, TcpStream};

    /// An open connection to a listener of the test's own (the kernel picks its port).
    async fn open(socket: &TcpListener) -> (Stream, TcpStream) {
        let client = TcpStream::connect(socket.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = socket.accept().await.unwrap();
        let stream: Stream = Box::new(pingora_core::protocols::l4::stream::Stream::from(client));
        (stream, server)
    }

    /// Connections are taken newest first, none idle for `idle_timeout` or longer at the
    /// instant the caller gives, and a put closes those idle that long on its way.
    #[tokio::test]
    async fn idle_connections_expire_by_the_instant_given() {
        let socket = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let idle_timeout = Duration::from_secs(60);
        let t0 = Instant::now();
        let (old, _old_server) = open(&socket).await;
        let (new, _new_server) = open(&socket).await;
        let (old_id, new_id) = (old.id(), new.id());
        put_at(1, old, 8, idle_timeout, t0);
        put_at(1, new, 8, idle_timeout, t0 + Duration::from_secs(30));

        let (taken, _) = take(1, idle_timeout, t0 + Duration::from_secs(59)).unwrap();
        assert_eq!(taken.id(), new_id, "the most recently used first");
        put_at(1, taken, 8, idle_timeout, t0 + Duration::from_secs(59));
        // At t0 + 60 s the first one is 60 s idle: the put of the second drops it.
        let (taken, _) = take(1, idle_timeout, t0 + Duration::from_secs(60)).unwrap();
        assert_eq!(taken.id(), new_id);
        put_at(1, taken, 8, idle_timeout, t0 + Duration::from_secs(60));
        assert!(IDLE.with(|p| p.borrow()[&1].iter().all(|i| i.stream.id() != old_id)));
        // Past its own timeout, the last one is not taken either.
        assert!(take(1, idle_timeout, t0 + Duration::from_secs(120)).is_none());
    }
}
