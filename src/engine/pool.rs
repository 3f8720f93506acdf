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

/// An idle connection to the server `key` names, used less than `idle_timeout` ago and
/// not closed by the server meanwhile.
pub fn take(key: u64, idle_timeout: Duration) -> Option<Stream> {
    loop {
        let mut idle = IDLE.with(|p| p.borrow_mut().get_mut(&key)?.pop())?;
        if idle.since.elapsed() < idle_timeout && is_open(&mut idle.stream) {
            return Some(idle.stream);
        }
        // Closed or too old: dropped, and the next one is looked at.
    }
}

/// Keeps `stream` for the next request to server `key`; past `most` idle connections to
/// it, the oldest is closed. Ones past `idle_timeout` are closed on the way.
pub fn put(key: u64, stream: Stream, most: usize, idle_timeout: Duration) {
    IDLE.with(|p| {
        let mut pool = p.borrow_mut();
        let idle = pool.entry(key).or_default();
        idle.retain(|i| i.since.elapsed() < idle_timeout);
        if idle.len() >= most.max(1) {
            idle.remove(0);
        }
        idle.push(Idle {
            stream,
            since: Instant::now(),
        });
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
