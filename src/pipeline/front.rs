//! What a front end's request gives the pipeline's steps: its fields, its target, the host
//! it names, and the connection it came on. Tether's HTTP/1 engine gives its view of the
//! read buffer; Pingora's proxy, its parsed head.

use crate::routing::Fields;
use std::net::IpAddr;

pub trait Front: Fields {
    /// The address of the connection's peer (before `trusted_proxies`).
    fn peer(&self) -> Option<IpAddr>;
    /// The port of the listener the request came to.
    fn local_port(&self) -> u16;
    /// The host the request names: its `Host`, or the authority of its target.
    fn host(&self) -> Option<&[u8]>;
    /// The target as the routing reads a session id from it.
    fn target(&self) -> &[u8];
    /// The target in origin-form: the path and query.
    fn origin(&self) -> &[u8];
}
