//! Idle client sockets kept out of tokio until their next bytes come: each parked socket is
//! a descriptor in an epoll set of the park's own and a slot of a hundred-odd bytes, with
//! no task, no buffer and no tokio registration (which alone is 256 bytes), as nginx keeps
//! a waiting connection in its small connection record. The park hands a socket back when
//! it becomes readable (its next request, or the client's end) or when its deadline passes.
//!
//! One park is one task's ([`Park::next`] is awaited in a loop); sockets are put in from
//! that same task. Readiness is edge-triggered: a socket that is readable when it is put in
//! is reported at once, so no byte that came while it moved here is missed.

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use slab::Slab;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;

/// Readiness reports taken from the kernel at a time.
const EVENTS: usize = 256;

/// Parked sockets and when each one's wait ends.
pub struct Park<T> {
    /// The park's epoll set, itself watched by the tokio reactor of the task that awaits
    /// [`Park::next`].
    poll: AsyncFd<Poll>,
    events: Events,
    slots: Slab<Slot<T>>,
    /// Each slot's deadline, earliest first. A slot emptied before its deadline leaves its
    /// entry here, skipped by `id` (a slot's key is reused) and swept when stale entries
    /// outnumber the live ones.
    deadlines: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    /// Slots reported readable and not handed back yet.
    ready: VecDeque<usize>,
    next_id: u64,
}

struct Slot<T> {
    socket: TcpStream,
    until: Instant,
    id: u64,
    with: T,
}

/// A socket the park gives back, with what was parked with it.
#[derive(Debug)]
pub enum Out<T> {
    /// Bytes came, or the client's end (the next read says which); `until` is its
    /// deadline as it was parked with.
    Readable {
        socket: TcpStream,
        until: Instant,
        with: T,
    },
    /// Its deadline passed first.
    Expired { socket: TcpStream, with: T },
}

impl<T> Park<T> {
    /// An empty park, watched by the reactor of the runtime this is called in.
    pub fn new() -> io::Result<Park<T>> {
        let poll = Poll::new()?;
        // SAFETY: the epoll descriptor is the `Poll`'s own, open until it is dropped, and the
        // `AsyncFd` owns the `Poll`.
        let poll = unsafe { AsyncFd::register_with_interest(poll, tokio::io::Interest::READABLE)? };
        Ok(Park {
            poll,
            events: Events::with_capacity(EVENTS),
            slots: Slab::new(),
            deadlines: BinaryHeap::new(),
            ready: VecDeque::new(),
            next_id: 0,
        })
    }

    /// Sockets parked now.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Parks `socket` (non-blocking) until it is readable or `until`. On an error it is
    /// dropped, and closed.
    pub fn put(&mut self, socket: TcpStream, until: Instant, with: T) -> io::Result<()> {
        let slot = self.slots.vacant_entry();
        let key = slot.key();
        self.poll.get_ref().registry().register(
            &mut SourceFd(&socket.as_raw_fd()),
            Token(key),
            Interest::READABLE,
        )?;
        let id = self.next_id;
        self.next_id += 1;
        slot.insert(Slot {
            socket,
            until,
            id,
            with,
        });
        self.deadlines.push(Reverse((until, id, key)));
        if self.deadlines.len() > 2 * self.slots.len() + 64 {
            let slots = &self.slots;
            self.deadlines
                .retain(|Reverse((_, id, key))| slots.get(*key).is_some_and(|s| s.id == *id));
        }
        Ok(())
    }

    /// The next socket that is readable or past its deadline (cancel-safe: nothing is lost
    /// when the wait is dropped). Readable sockets come first; each is out of the park's
    /// epoll set when it is given back.
    pub async fn next(&mut self) -> io::Result<Out<T>> {
        loop {
            while let Some(key) = self.ready.pop_front() {
                if let Some(slot) = self.slots.try_remove(key) {
                    self.forget(&slot.socket);
                    return Ok(Out::Readable {
                        socket: slot.socket,
                        until: slot.until,
                        with: slot.with,
                    });
                }
            }
            let earliest = self.earliest();
            if let Some((until, key)) = earliest.filter(|(until, _)| *until <= Instant::now()) {
                self.deadlines.pop();
                let slot = self.slots.remove(key);
                debug_assert!(slot.until == until);
                self.forget(&slot.socket);
                return Ok(Out::Expired {
                    socket: slot.socket,
                    with: slot.with,
                });
            }
            let deadline = async {
                match earliest {
                    Some((until, _)) => tokio::time::sleep_until(until.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ready = self.poll.readable_mut() => {
                    let mut guard = ready?;
                    match guard.get_inner_mut().poll(&mut self.events, Some(Duration::ZERO)) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    }
                    let mut reported = 0;
                    for event in self.events.iter() {
                        self.ready.push_back(event.token().0);
                        reported += 1;
                    }
                    // Fewer than asked for: the kernel's ready list was emptied, and the
                    // reactor reports the set again when a socket in it becomes ready.
                    if reported < EVENTS {
                        guard.clear_ready();
                    }
                }
                () = deadline => {}
            }
        }
    }

    /// The earliest deadline of a socket still parked, and its slot (stale entries are
    /// dropped on the way).
    fn earliest(&mut self) -> Option<(Instant, usize)> {
        while let Some(Reverse((until, id, key))) = self.deadlines.peek().copied() {
            if self.slots.get(key).is_some_and(|s| s.id == id) {
                return Some((until, key));
            }
            self.deadlines.pop();
        }
        None
    }

    /// Takes a socket out of the park's epoll set (it is given back, to be watched by
    /// tokio again or closed).
    fn forget(&self, socket: &TcpStream) {
        let _ = self
            .poll
            .get_ref()
            .registry()
            .deregister(&mut SourceFd(&socket.as_raw_fd()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A connected pair: the server's side non-blocking (as a parked socket is), and the
    /// client's.
    fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        (server, client)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn later(seconds: u64) -> Instant {
        Instant::now() + Duration::from_secs(seconds)
    }

    /// Of many parked sockets, the one whose client writes comes back, with what was
    /// parked with it and its deadline; its bytes are still there to read.
    #[test]
    fn the_socket_whose_client_writes_comes_back_with_its_bytes() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        runtime().block_on(async {
            let mut park = Park::new().unwrap();
            let mut clients = Vec::new();
            let until = later(30);
            for n in 0..10 {
                let (server, client) = pair(&listener);
                park.put(server, until, n).unwrap();
                clients.push(client);
            }
            assert_eq!(park.len(), 10);
            clients[7].write_all(b"GET /").unwrap();
            let out = tokio::time::timeout(Duration::from_secs(5), park.next()).await;
            let Ok(Ok(Out::Readable {
                mut socket,
                until: was,
                with,
            })) = out
            else {
                panic!("no readable socket: {out:?}");
            };
            assert_eq!((with, was), (7, until));
            assert_eq!(park.len(), 9);
            socket.set_nonblocking(false).unwrap();
            let mut got = [0u8; 5];
            socket.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"GET /");
            // No other socket is ready.
            let more = tokio::time::timeout(Duration::from_millis(200), park.next()).await;
            assert!(more.is_err(), "{more:?}");
        });
    }

    /// Bytes that came before the socket was parked are reported too (edge-triggered
    /// readiness is reported when the socket is added).
    #[test]
    fn bytes_that_came_before_the_park_wake_it() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        runtime().block_on(async {
            let mut park = Park::new().unwrap();
            let (server, mut client) = pair(&listener);
            client.write_all(b"x").unwrap();
            std::thread::sleep(Duration::from_millis(50));
            park.put(server, later(30), ()).unwrap();
            let out = tokio::time::timeout(Duration::from_secs(5), park.next()).await;
            assert!(matches!(out, Ok(Ok(Out::Readable { .. }))), "{out:?}");
            assert!(park.is_empty());
        });
    }

    /// A client that closes wakes its socket at once (it is not held to its deadline).
    #[test]
    fn a_client_that_closes_wakes_its_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        runtime().block_on(async {
            let mut park = Park::new().unwrap();
            let (server, client) = pair(&listener);
            park.put(server, later(30), ()).unwrap();
            drop(client);
            let out = tokio::time::timeout(Duration::from_secs(5), park.next()).await;
            let Ok(Ok(Out::Readable { mut socket, .. })) = out else {
                panic!("the close did not wake it: {out:?}");
            };
            socket.set_nonblocking(false).unwrap();
            assert_eq!(socket.read(&mut [0u8; 1]).unwrap(), 0);
        });
    }

    /// Deadlines end waits in their order, each at its time, whatever the order the
    /// sockets were parked in; a socket given back before its deadline is not expired.
    #[test]
    fn deadlines_expire_in_order_and_skip_sockets_given_back() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        runtime().block_on(async {
            let mut park = Park::new().unwrap();
            let start = Instant::now();
            let ms = |n| start + Duration::from_millis(n);
            let (a, _ca) = pair(&listener);
            let (b, mut cb) = pair(&listener);
            let (c, _cc) = pair(&listener);
            park.put(a, ms(400), "a").unwrap();
            park.put(b, ms(100), "b").unwrap();
            park.put(c, ms(200), "c").unwrap();
            cb.write_all(b"x").unwrap();
            let mut order = Vec::new();
            for _ in 0..3 {
                match park.next().await.unwrap() {
                    Out::Readable { with, .. } => order.push(("readable", with, start.elapsed())),
                    Out::Expired { with, .. } => order.push(("expired", with, start.elapsed())),
                }
            }
            let names: Vec<_> = order.iter().map(|(how, with, _)| (*how, *with)).collect();
            assert_eq!(
                names,
                [("readable", "b"), ("expired", "c"), ("expired", "a")]
            );
            assert!(order[1].2 >= Duration::from_millis(200), "{order:?}");
            assert!(order[2].2 >= Duration::from_millis(400), "{order:?}");
            assert!(park.is_empty());
        });
    }

    /// A parked connection's slot, with what the listener parks with it, stays at the size
    /// the docs give (DESIGN §10, docs/performance.md).
    #[test]
    fn a_slot_is_80_bytes_and_a_deadline_32() {
        let slot = std::mem::size_of::<Slot<crate::front::listener::Resume>>();
        let deadline = std::mem::size_of::<Reverse<(Instant, u64, usize)>>();
        assert!(slot <= 80, "{slot}");
        assert_eq!(deadline, 32);
    }

    /// Slots are reused; the deadline entries of sockets given back are swept, not kept
    /// one per park for as long as the park lives.
    #[test]
    fn stale_deadlines_do_not_pile_up() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        runtime().block_on(async {
            let mut park = Park::new().unwrap();
            for _ in 0..500 {
                let (server, mut client) = pair(&listener);
                park.put(server, later(30), ()).unwrap();
                client.write_all(b"x").unwrap();
                let out = park.next().await.unwrap();
                assert!(matches!(out, Out::Readable { .. }));
            }
            assert!(park.is_empty());
            assert!(park.deadlines.len() <= 66, "{}", park.deadlines.len());
        });
    }
}
