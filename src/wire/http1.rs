//! HTTP/1 syntax for tether's own engine: a request head indexed in the read
//! buffer, the framing policy of a request's body, the chunked coding, the fields
//! `Connection` nominates, and a target's absolute form. Pure: no
//! sockets, no Pingora, nothing of tether above it; `docs/DESIGN.md` section 10.

pub mod chunked;
pub mod connection;
pub mod framing;
pub mod head;
pub mod response;
pub mod target;
