//! The listener's UDP socket and the task that reads it: each datagram goes to the
//! connection its destination connection id names (a channel to that connection's task);
//! a client's first Initial packet makes a new connection (`quiche::accept`), served in a
//! task of its own on one of the listener's threads; an unknown version gets Version
//! Negotiation. Connections tell the router which ids route to them, and when they end.

use super::conn::Conn;
use super::ids::{new_cid, stateless_reset, Datagram, Keys, ToRouter, CID_LEN, MAX_DATAGRAM};
use crate::front::streams::Streams;
use log::{debug, warn};
use pingora_core::server::ExecutionPhase;
use pingora_core::server::ShutdownWatch;
use prometheus::IntCounter;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::UdpSocket;
use tokio::sync::broadcast;
use tokio::sync::mpsc::{self, Sender};

/// Datagrams queued for one connection's task; past this they are dropped, as a full
/// socket buffer drops them (QUIC recovers).
const QUEUE: usize = 256;

pub struct Router {
    pub socket: Arc<UdpSocket>,
    pub local: SocketAddr,
    pub quic: quiche::Config,
    pub h3: Arc<quiche::h3::Config>,
    pub streams: Arc<Streams>,
    pub shutdown: ShutdownWatch,
    pub keys: Arc<Keys>,
    /// From how many connections a new client proves its address first (a Retry).
    pub retry_above: usize,
    /// Packets sent without a connection: Retries, stateless resets.
    pub sent: (IntCounter, IntCounter),
    /// The server's phases: when this process hands its sockets to a new one, it stops
    /// reading the UDP socket at once.
    pub phases: broadcast::Receiver<ExecutionPhase>,
}

/// Where an id routes: its connection and that connection's queue.
struct Route {
    conn: u64,
    to: Sender<Datagram>,
}

/// A connection's queue and the ids that route to it.
struct Owned {
    to: Sender<Datagram>,
    cids: Vec<Vec<u8>>,
}

impl Router {
    pub async fn run(mut self) {
        let (told, mut telling) = mpsc::unbounded_channel();
        let mut routes: HashMap<Vec<u8>, Route> = HashMap::new();
        let mut ids: HashMap<u64, Owned> = HashMap::new();
        let mut next = 0u64;
        let mut buf = vec![0u8; 65535];
        let mut out = vec![0u8; MAX_DATAGRAM];
        let mut shutdown = self.shutdown.clone();
        let mut watching = true;
        loop {
            tokio::select! {
                biased;
                Some(t) = telling.recv() => tell(t, &mut routes, &mut ids),
                got = self.socket.recv_from(&mut buf) => {
                    let (len, from) = match got {
                        Ok(got) => got,
                        Err(e) => {
                            debug!("QUIC socket {}: {e}", self.local);
                            continue;
                        }
                    };
                    let packet = &mut buf[..len];
                    let Ok(header) = quiche::Header::from_slice(packet, CID_LEN) else {
                        continue;
                    };
                    if let Some(route) = routes.get(header.dcid.as_ref()) {
                        let _ = route.to.try_send((packet.to_vec(), from));
                        continue;
                    }
                    let (scid, odcid) = match self.unknown(&header, len, from, ids.len(), &mut out) {
                        Unknown::Answer(n) => {
                            let _ = self.socket.send_to(&out[..n], from).await;
                            continue;
                        }
                        Unknown::Drop => continue,
                        Unknown::Accept { scid, odcid } if !*shutdown.borrow() => (scid, odcid),
                        Unknown::Accept { .. } => continue,
                    };
                    let id = quiche::ConnectionId::from_ref(&scid);
                    let odcid = odcid.map(quiche::ConnectionId::from_vec);
                    self.quic
                        .set_stateless_reset_token(Some(self.keys.reset_token(&scid)));
                    let quic = match quiche::accept(&id, odcid.as_ref(), self.local, from, &mut self.quic) {
                        Ok(quic) => quic,
                        Err(e) => {
                            debug!("QUIC connection from {from}: {e}");
                            continue;
                        }
                    };
                    let conn = next;
                    next += 1;
                    debug!("QUIC connection {conn} from {from}");
                    let (to, packets) = mpsc::channel(QUEUE);
                    let _ = to.try_send((packet.to_vec(), from));
                    // The client's own first id routes here until it takes ours.
                    let first = header.dcid.to_vec();
                    for cid in [&scid, &first] {
                        routes.insert(cid.clone(), Route { conn, to: to.clone() });
                    }
                    ids.insert(conn, Owned { to, cids: vec![scid, first] });
                    let task = Conn {
                        id: conn,
                        quic,
                        socket: self.socket.clone(),
                        local: self.local,
                        peer: from,
                        streams: self.streams.clone(),
                        router: told.clone(),
                        h3_config: self.h3.clone(),
                        keys: self.keys.clone(),
                    };
                    pingora_runtime::current_handle().spawn(task.run(packets, self.shutdown.clone()));
                }
                phase = self.phases.recv(), if watching => match phase {
                    // The new process reads the socket from now on: two readers would
                    // share out each connection's datagrams between them. This one's
                    // connections close (their queues end with the router), and their
                    // clients connect again, to the new process.
                    Ok(ExecutionPhase::GracefulUpgradeTransferringFds) => break,
                    Err(broadcast::error::RecvError::Closed) => watching = false,
                    _ => {}
                },
                changed = shutdown.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    if *shutdown.borrow() && routes.is_empty() {
                        break;
                    }
                }
            }
            if *shutdown.borrow() && routes.is_empty() {
                break;
            }
        }
        if !routes.is_empty() {
            warn!(
                "QUIC socket {}: closed with {} connection ids routed",
                self.local,
                routes.len()
            );
        }
    }
}

/// What a datagram for no connection this router knows gets.
enum Unknown {
    /// A packet back (`out`'s first bytes): Version Negotiation, Retry or a reset.
    Answer(usize),
    /// A new connection: the id it gets, and the id its client first chose when its
    /// address was proved by a Retry.
    Accept {
        scid: Vec<u8>,
        odcid: Option<Vec<u8>>,
    },
    Drop,
}

impl Router {
    /// `header` (of a `len`-byte packet from `from`) names no connection of this router,
    /// which holds `live` connections.
    fn unknown(
        &self,
        header: &quiche::Header<'_>,
        len: usize,
        from: SocketAddr,
        live: usize,
        out: &mut [u8],
    ) -> Unknown {
        match header.ty {
            quiche::Type::Initial => {}
            // A connection this process does not have (another's before a restart, or one
            // that ended): the client learns at once that it is gone.
            quiche::Type::Short => {
                return match stateless_reset(&self.keys, &header.dcid, len, out) {
                    Some(n) => {
                        self.sent.1.inc();
                        Unknown::Answer(n)
                    }
                    None => Unknown::Drop,
                }
            }
            _ => return Unknown::Drop,
        }
        if !quiche::version_is_supported(header.version) {
            return match quiche::negotiate_version(&header.scid, &header.dcid, out) {
                Ok(n) => Unknown::Answer(n),
                Err(_) => Unknown::Drop,
            };
        }
        if live < self.retry_above {
            return Unknown::Accept {
                scid: new_cid(),
                odcid: None,
            };
        }
        let token = header.token.as_deref().unwrap_or_default();
        if token.is_empty() {
            let scid = new_cid();
            let retry_token = self.keys.retry_token(from, &header.dcid);
            let scid = quiche::ConnectionId::from_ref(&scid);
            return match quiche::retry(
                &header.scid,
                &header.dcid,
                &scid,
                &retry_token,
                header.version,
                out,
            ) {
                Ok(n) => {
                    self.sent.0.inc();
                    Unknown::Answer(n)
                }
                Err(_) => Unknown::Drop,
            };
        }
        match self.keys.check_retry(from, token) {
            // After a Retry the client's destination is the id the Retry gave it.
            Some(odcid) => Unknown::Accept {
                scid: header.dcid.to_vec(),
                odcid: Some(odcid.to_vec()),
            },
            None => Unknown::Drop,
        }
    }
}

fn tell(t: ToRouter, routes: &mut HashMap<Vec<u8>, Route>, ids: &mut HashMap<u64, Owned>) {
    match t {
        ToRouter::Add(conn, cid) => {
            let Some(own) = ids.get_mut(&conn) else {
                return;
            };
            let to = own.to.clone();
            own.cids.push(cid.clone());
            routes.insert(cid, Route { conn, to });
        }
        ToRouter::Remove(cid) => {
            if let Some(route) = routes.remove(&cid) {
                if let Some(own) = ids.get_mut(&route.conn) {
                    own.cids.retain(|c| *c != cid);
                }
            }
        }
        ToRouter::Closed(conn) => {
            for cid in ids.remove(&conn).map(|o| o.cids).unwrap_or_default() {
                routes.remove(&cid);
            }
        }
    }
}
