//! One QUIC connection and its HTTP/3 requests, in one task on one of the listener's
//! threads (as an HTTP/2 connection is): the datagrams the router sends it go into quiche,
//! quiche's timers are kept, each request stream is served by the request streams' steps
//! (`crate::front::streams`) in this task, what they send goes out within QUIC's flow
//! control, and its packets go back out on the listener's socket. A stop sends GOAWAY and
//! lets the requests in flight end.

use super::ids::{new_cid, Datagram, Keys, ToRouter, MAX_DATAGRAM};
use super::io::{Body, Command, Shared, RECV_WINDOW};
use crate::front::streams::{io::Gone, Link, Served, Streams};
use bytes::{Buf, Bytes};
use futures::stream::{FuturesUnordered, StreamExt};
use log::debug;
use pingora_core::protocols::tls::SslDigest;
use pingora_core::server::ShutdownWatch;
use quiche::h3;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::mpsc::{self, Receiver, UnboundedSender};

/// How long a connection told to go away may take to end once no request is left.
const GOAWAY_DRAIN: Duration = Duration::from_secs(5);

/// How long a connection told to go away stays once its last answer went to QUIC: for
/// the answer to reach the client before the connection closes.
const ANSWERS_LINGER: Duration = Duration::from_millis(500);

/// H3_NO_ERROR (RFC 9114 §8.1).
const NO_ERROR: u64 = 0x0100;

/// H3_GENERAL_PROTOCOL_ERROR: the client broke HTTP/3.
const H3_GENERAL_PROTOCOL_ERROR: u64 = 0x0101;

/// What the connection keeps of one of its request streams.
struct Stream {
    shared: Arc<Shared>,
    /// The body's channel to the stream, until the client's end of it.
    body: Option<UnboundedSender<Result<Bytes, Gone>>>,
    /// What the stream sent and QUIC has not taken yet, in order.
    out: VecDeque<Out>,
    /// The stream's future ended.
    done: bool,
}

enum Out {
    Head(Vec<h3::Header>, bool),
    Data(Bytes, bool),
}

type Served3 = Pin<Box<dyn Future<Output = (u64, Served)> + Send>>;

/// A connection's task and what it holds.
pub struct Conn {
    pub id: u64,
    pub quic: quiche::Connection,
    pub socket: Arc<UdpSocket>,
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub streams: Arc<Streams>,
    pub router: UnboundedSender<ToRouter>,
    pub h3_config: Arc<h3::Config>,
    pub keys: Arc<Keys>,
}

impl Conn {
    /// Serves the connection until it closes.
    pub async fn run(mut self, mut packets: Receiver<Datagram>, mut shutdown: ShutdownWatch) {
        let _open = crate::front::listener::OpenInProcess::count();
        let (commands, mut commanded) = mpsc::unbounded_channel();
        let mut h3: Option<h3::Connection> = None;
        let mut tls: Option<Arc<SslDigest>> = None;
        let mut streams: HashMap<u64, Stream> = HashMap::new();
        let mut serving: FuturesUnordered<Served3> = FuturesUnordered::new();
        let mut buf = vec![0u8; MAX_DATAGRAM * 4];
        let mut closing = false;
        // The first request stream not taken: a GOAWAY tells the client that every one
        // before it is served.
        let mut next_stream = 0u64;
        let mut drain_until: Option<tokio::time::Instant> = None;
        loop {
            if let Some(digest) = crate::state::tls::quic::handshake_done() {
                tls = Some(Arc::new(digest));
            }
            if h3.is_none() && (self.quic.is_established() || self.quic.is_in_early_data()) {
                match h3::Connection::with_transport(&mut self.quic, &self.h3_config) {
                    Ok(h) => h3 = Some(h),
                    Err(e) => {
                        debug!("HTTP/3 setup: {e}");
                        let _ = self.quic.close(true, H3_GENERAL_PROTOCOL_ERROR, b"");
                    }
                }
            }
            if let Some(h) = h3.as_mut() {
                let link = Link {
                    peer: Some(self.peer),
                    local: Some(self.local),
                    tls: tls.clone(),
                    proxy: None,
                };
                self.events(h, &mut streams, &mut serving, &commands, &mut buf, link);
                if let Some(&last) = streams.keys().max() {
                    next_stream = next_stream.max(last + 4);
                }
                if *shutdown.borrow() && !closing {
                    closing = true;
                    let _ = h.send_goaway(&mut self.quic, next_stream);
                    drain_until = Some(tokio::time::Instant::now() + GOAWAY_DRAIN);
                }
                flush(h, &mut self.quic, &mut streams);
            }
            if closing && !self.quic.is_closed() {
                let now = tokio::time::Instant::now();
                // The last answers went to QUIC, not yet to the client (nor acknowledged):
                // a moment for them, unless the client closes first.
                if serving.is_empty() && streams.is_empty() {
                    let linger = now + ANSWERS_LINGER;
                    drain_until = Some(drain_until.map_or(linger, |t| t.min(linger)));
                }
                if drain_until.is_some_and(|t| t <= now) {
                    let _ = self.quic.close(true, NO_ERROR, b"");
                }
            }
            self.send_packets(&mut buf).await;
            self.connection_ids();
            if self.quic.is_closed() {
                break;
            }
            let mut wait = self.quic.timeout().unwrap_or(Duration::from_secs(3600));
            if let Some(until) = drain_until {
                wait = wait.min(until.saturating_duration_since(tokio::time::Instant::now()));
            }
            tokio::select! {
                biased;
                packet = packets.recv() => match packet {
                    Some(d) => {
                        self.recv(d);
                        while let Ok(d) = packets.try_recv() {
                            self.recv(d);
                        }
                    }
                    // The router stopped (the socket went to a new process): the client is
                    // told the connection ends, and connects again.
                    None => {
                        let _ = self.quic.close(true, NO_ERROR, b"");
                        self.send_packets(&mut buf).await;
                        break;
                    }
                },
                Some(c) = commanded.recv() => {
                    self.command(h3.as_mut(), &mut streams, c, &mut buf);
                    while let Ok(c) = commanded.try_recv() {
                        self.command(h3.as_mut(), &mut streams, c, &mut buf);
                    }
                }
                Some((id, _served)) = serving.next(), if !serving.is_empty() => {
                    // What the stream sent before it ended goes before it is forgotten.
                    while let Ok(c) = commanded.try_recv() {
                        self.command(h3.as_mut(), &mut streams, c, &mut buf);
                    }
                    if let Some(s) = streams.get_mut(&id) {
                        s.done = true;
                        // A body the answer did not need: the client may stop sending it.
                        if s.body.take().is_some() {
                            let _ = self.quic.stream_shutdown(id, quiche::Shutdown::Read, NO_ERROR);
                        }
                    }
                }
                () = tokio::time::sleep(wait) => self.quic.on_timeout(),
                _ = shutdown.changed(), if !closing => {}
            }
        }
        for s in streams.values() {
            s.shared.end();
        }
        let _ = self.router.send(ToRouter::Closed(self.id));
    }

    fn recv(&mut self, (mut data, from): Datagram) {
        self.peer = from;
        let info = quiche::RecvInfo {
            from,
            to: self.local,
        };
        if let Err(e) = self.quic.recv(&mut data, info) {
            debug!("QUIC packet from {from}: {e}");
        }
    }

    /// The HTTP/3 events quiche has: new requests, their bodies' data and ends, resets.
    fn events(
        &mut self,
        h: &mut h3::Connection,
        streams: &mut HashMap<u64, Stream>,
        serving: &mut FuturesUnordered<Served3>,
        commands: &UnboundedSender<Command>,
        buf: &mut [u8],
        link: Link,
    ) {
        loop {
            match h.poll(&mut self.quic) {
                Ok((id, h3::Event::Headers { list, more_frames })) => {
                    let Some(parts) = super::request::parts(&list) else {
                        let code = super::request::MESSAGE_ERROR;
                        let _ = self.quic.stream_shutdown(id, quiche::Shutdown::Read, code);
                        let _ = self.quic.stream_shutdown(id, quiche::Shutdown::Write, code);
                        continue;
                    };
                    let shared = Arc::new(Shared::default());
                    let (data, received) = mpsc::unbounded_channel();
                    let body = Body {
                        id,
                        shared: shared.clone(),
                        data: received,
                        commands: commands.clone(),
                        ended: !more_frames,
                    };
                    let answer = super::io::Answer {
                        id,
                        shared: shared.clone(),
                        commands: commands.clone(),
                    };
                    streams.insert(
                        id,
                        Stream {
                            shared,
                            body: more_frames.then_some(data),
                            out: VecDeque::new(),
                            done: false,
                        },
                    );
                    let front = self.streams.clone();
                    let link = Link {
                        peer: link.peer,
                        local: link.local,
                        tls: link.tls.clone(),
                        proxy: None,
                    };
                    serving.push(Box::pin(async move {
                        (id, front.stream(parts, body, answer, &link).await)
                    }));
                }
                Ok((id, h3::Event::Data)) => self.read_body(h, streams, id, buf),
                Ok((id, h3::Event::Finished)) => {
                    if let Some(s) = streams.get_mut(&id) {
                        s.body = None;
                    }
                }
                Ok((id, h3::Event::Reset(_))) => {
                    if let Some(s) = streams.get_mut(&id) {
                        if let Some(body) = s.body.take() {
                            let _ = body.send(Err(Gone));
                        }
                        s.shared.end();
                    }
                }
                Ok(_) => {}
                Err(h3::Error::Done) => return,
                Err(e) => {
                    debug!("HTTP/3 connection from {}: {e}", self.peer);
                    let _ = self.quic.close(true, H3_GENERAL_PROTOCOL_ERROR, b"");
                    return;
                }
            }
        }
    }

    /// Reads a stream's body from QUIC while the stream holds less than its window unread.
    fn read_body(
        &mut self,
        h: &mut h3::Connection,
        streams: &mut HashMap<u64, Stream>,
        id: u64,
        buf: &mut [u8],
    ) {
        let Some(s) = streams.get_mut(&id) else {
            return;
        };
        while s.shared.unread.load(Ordering::Acquire) < RECV_WINDOW {
            match h.recv_body(&mut self.quic, id, buf) {
                Ok(n) => {
                    s.shared.unread.fetch_add(n, Ordering::AcqRel);
                    if let Some(body) = &s.body {
                        let _ = body.send(Ok(Bytes::copy_from_slice(&buf[..n])));
                    }
                }
                Err(h3::Error::Done) => return,
                Err(_) => {
                    if let Some(body) = s.body.take() {
                        let _ = body.send(Err(Gone));
                    }
                    s.shared.end();
                    return;
                }
            }
        }
    }

    fn command(
        &mut self,
        h: Option<&mut h3::Connection>,
        streams: &mut HashMap<u64, Stream>,
        command: Command,
        buf: &mut [u8],
    ) {
        match command {
            Command::Head { id, fields, fin } => {
                if let Some(s) = streams.get_mut(&id) {
                    s.out.push_back(Out::Head(fields, fin));
                }
            }
            Command::Data { id, data, fin } => {
                if let Some(s) = streams.get_mut(&id) {
                    s.out.push_back(Out::Data(data, fin));
                }
            }
            Command::Taken { id } => {
                if let Some(h) = h {
                    self.read_body(h, streams, id, buf);
                }
            }
            Command::Reset { id, code } => {
                let _ = self.quic.stream_shutdown(id, quiche::Shutdown::Write, code);
                let _ = self.quic.stream_shutdown(id, quiche::Shutdown::Read, code);
                if let Some(s) = streams.get_mut(&id) {
                    s.out.clear();
                    s.shared.end();
                }
            }
        }
    }

    async fn send_packets(&mut self, buf: &mut [u8]) {
        loop {
            let out = &mut buf[..MAX_DATAGRAM];
            match self.quic.send(out) {
                Ok((n, info)) => {
                    if let Err(e) = self.socket.send_to(&out[..n], info.to).await {
                        debug!("QUIC send to {}: {e}", info.to);
                    }
                }
                Err(quiche::Error::Done) => return,
                Err(e) => {
                    debug!("QUIC connection from {}: {e}", self.peer);
                    let _ = self.quic.close(false, 0x1, b"");
                    return;
                }
            }
        }
    }

    /// Keeps the client supplied with connection ids of this connection (to move to a new
    /// path with), and the router told which ones route here.
    fn connection_ids(&mut self) {
        while self.quic.scids_left() > 0 {
            let cid = new_cid();
            let token = self.keys.reset_token(&cid);
            let id = quiche::ConnectionId::from_vec(cid.clone());
            if self.quic.new_scid(&id, token, false).is_err() {
                break;
            }
            let _ = self.router.send(ToRouter::Add(self.id, cid));
        }
        while let Some(old) = self.quic.retired_scid_next() {
            let _ = self.router.send(ToRouter::Remove(old.to_vec()));
        }
    }
}

/// Hands QUIC what the streams sent, in each stream's order, as far as its flow control
/// takes it; streams whose future ended and whose answer went are forgotten.
fn flush(
    h: &mut h3::Connection,
    quic: &mut quiche::Connection,
    streams: &mut HashMap<u64, Stream>,
) {
    for (&id, s) in streams.iter_mut() {
        let before = s.shared.unsent.load(Ordering::Acquire);
        let mut taken = 0;
        while let Some(front) = s.out.front_mut() {
            match front {
                Out::Head(fields, fin) => match h.send_response(quic, id, fields, *fin) {
                    Ok(()) => {
                        s.out.pop_front();
                    }
                    Err(h3::Error::StreamBlocked | h3::Error::Done) => break,
                    Err(_) => {
                        s.out.clear();
                        s.shared.end();
                    }
                },
                Out::Data(data, fin) => match h.send_body(quic, id, data, *fin) {
                    Ok(n) if n == data.len() => {
                        taken += n;
                        s.out.pop_front();
                    }
                    Ok(n) => {
                        taken += n;
                        data.advance(n);
                        break;
                    }
                    Err(h3::Error::Done) => break,
                    Err(_) => {
                        s.out.clear();
                        s.shared.end();
                    }
                },
            }
        }
        if taken > 0 {
            s.shared
                .unsent
                .fetch_sub(taken.min(before), Ordering::AcqRel);
            s.shared.window.wake();
        }
    }
    streams.retain(|_, s| !(s.done && s.out.is_empty()));
}
