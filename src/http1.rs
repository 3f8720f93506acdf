//! HTTP/1 syntax for tether's own engine (issue 24): a request head indexed in the read
//! buffer, the framing policy of a request's body, and the chunked coding. Pure: no
//! sockets, no Pingora, nothing of tether above it; `docs/DESIGN.md` section 10.

pub mod chunked;
pub mod framing;
pub mod head;
pub mod response;
