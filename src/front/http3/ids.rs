//! What the router and the connections say to each other: the datagrams the router hands
//! a connection, the connection ids a connection tells the router to route to it, and how
//! such ids are made.

use std::net::SocketAddr;

/// The length of the connection ids tether issues.
pub const CID_LEN: usize = quiche::MAX_CONN_ID_LEN;

/// The largest UDP payload tether sends (what every path between loopback and the internet
/// carries, as quiche's examples use).
pub const MAX_DATAGRAM: usize = 1350;

/// A datagram and its sender's address.
pub type Datagram = (Vec<u8>, SocketAddr);

/// What connections tell the router.
pub enum ToRouter {
    /// Connection `.0` issued id `.1`.
    Add(u64, Vec<u8>),
    /// An id the client retired.
    Remove(Vec<u8>),
    /// The connection ended: none of its ids route anywhere.
    Closed(u64),
}

/// A fresh, random connection id.
pub fn new_cid() -> Vec<u8> {
    let mut cid = vec![0u8; CID_LEN];
    boring::rand::rand_bytes(&mut cid).expect("BoringSSL's random bytes");
    cid
}
