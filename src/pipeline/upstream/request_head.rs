//! The request head tether sends to a server over HTTP/1, written straight into a write
//! buffer by every front end that carries out the exchange itself: the client's fields
//! less its hop-by-hop fields (RFC 9110 §7.6.1), its `$WS*` fields and the fields tether
//! sets itself, then tether's edits (`crate::pipeline::UpstreamFields`, the same code
//! pingora-proxy's path runs).

use crate::pipeline::RequestCtx;
use crate::pipeline::{Secure, UpstreamFields};
use crate::wire::http1::framing::Body;
use std::net::{IpAddr, SocketAddr};

/// Fields of the client's hop only; never relayed. (`Expect: 100-continue` is answered
/// by tether, and the only expectation it takes.)
const HOP: [&str; 9] = [
    "expect",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

/// What tether sets on the upstream head, so the client's own go.
pub struct Replaced<'a> {
    /// `X-Forwarded-For`, `-Proto`, `-Host` (the listener's `forwarded_headers`).
    pub forwarded: bool,
    /// Tomcat `SSLValve` field names, when the cluster sets them.
    pub ssl: Option<&'a crate::config::SslHeaders>,
    /// The client's `Connection` nominates fields (checked: `http1::connection`).
    pub nominated: bool,
    /// The client asks for an upgrade (`Connection: upgrade` and `Upgrade`), which the
    /// server is asked for in turn: its `Upgrade` passes, with `Connection: Upgrade`.
    pub upgrade: bool,
}

/// Is `name` one the client's head must not pass on?
#[inline]
pub fn dropped(name: &[u8], replaced: &Replaced) -> bool {
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    if HOP.iter().any(|h| is(h)) || is("content-length") || is("transfer-encoding") {
        return true;
    }
    if name.len() >= 3 && name[..3].eq_ignore_ascii_case(b"$ws") {
        return true;
    }
    if replaced.forwarded
        && (is("x-forwarded-for") || is("x-forwarded-proto") || is("x-forwarded-host"))
    {
        return true;
    }
    replaced.ssl.is_some_and(|s| {
        [&s.client_cert, &s.cipher, &s.session_id, &s.key_size]
            .iter()
            .any(|n| is(n))
    })
}

/// Where the client's fields are read from, for the edits.
pub trait Source {
    /// The first value of the client's field `name` (lower case).
    fn first(&self, name: &str) -> Option<&[u8]>;
}

/// `name: value` and its line end.
#[inline]
pub fn line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// The framing fields of a body framed as `body`.
pub fn framing(out: &mut Vec<u8>, body: Body) {
    match body {
        Body::Length(n) => {
            let mut digits = [0u8; 48];
            let n = crate::pipeline::write_on_stack(&mut digits, n);
            line(out, b"Content-Length", n);
        }
        Body::Chunked => line(out, b"Transfer-Encoding", b"chunked"),
        Body::Empty => {}
    }
}

/// The upstream head being written after the client's fields that pass: the client's
/// fields (for what the edits read) and the buffer.
pub struct Upstream<'a, S> {
    client: &'a S,
    pub out: &'a mut Vec<u8>,
}

impl<'a, S: Source> Upstream<'a, S> {
    /// The head in `out` so far: its request line and the client's fields that pass.
    pub fn new(client: &'a S, out: &'a mut Vec<u8>) -> Self {
        Upstream { client, out }
    }

    /// Ends the head (the empty line).
    pub fn finish(self) {
        self.out.extend_from_slice(b"\r\n");
    }
}

/// The client's fields that tether replaces were left out when the head was started, so
/// setting one is writing it, and removing one is already done.
impl<S: Source> UpstreamFields for Upstream<'_, S> {
    fn get(&self, name: &str) -> Option<&[u8]> {
        self.client.first(name)
    }

    fn set(&mut self, name: &'static str, value: &[u8]) {
        line(self.out, name.as_bytes(), value);
    }

    fn set_static(&mut self, name: &'static str, value: &'static str) {
        line(self.out, name.as_bytes(), value.as_bytes());
    }

    fn set_named(&mut self, name: &str, value: &[u8]) {
        line(self.out, name.as_bytes(), value);
    }

    fn append_list(&mut self, name: &'static str, value: &[u8]) {
        // As pingora-proxy's path: the first of the client's lines, joined with `, `.
        let old = self.client.first(name);
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b": ");
        if let Some(old) = old.filter(|o| !o.is_empty()) {
            self.out.extend_from_slice(old);
            self.out.extend_from_slice(b", ");
        }
        self.out.extend_from_slice(value);
        self.out.extend_from_slice(b"\r\n");
    }

    fn copy_field(&mut self, from: &str, to: &'static str) -> bool {
        match self.client.first(from) {
            Some(v) => {
                line(self.out, to.as_bytes(), v);
                true
            }
            None => false,
        }
    }

    fn remove(&mut self, _name: &str) {}
}

/// tether's edits of the upstream head, after the client's fields: `X-Forwarded-*`, the
/// `SSLValve` fields, a `Host` where the client sent none, and WebSphere's `$WS*` fields;
/// `link`: the client connection's peer and local addresses and its TLS, `http2`: the
/// client spoke HTTP/2 (as `$WSPR` says).
pub fn edit<S: Source>(
    up: &mut Upstream<'_, S>,
    ctx: &RequestCtx,
    (peer, local, secure): (Option<IpAddr>, Option<SocketAddr>, Option<&Secure>),
    http2: bool,
) {
    let router = ctx.router.as_ref().expect("a routed request");
    if ctx.forwarded {
        crate::pipeline::set_forwarded(up, peer, secure.is_some());
    }
    if let Some(names) = &ctx.ssl_headers {
        crate::pipeline::set_ssl_headers(up, names, secure);
    }
    if up.get("host").is_none() {
        // HTTP/1.0 may leave Host out, HTTP/1.1 may not (as `front/proxy.rs`). Rare: allocates.
        if let Some(i) = ctx.server {
            let server = &router.servers()[i].config;
            let host = match &server.host {
                Some(name) => format!("{name}:{}", server.address.port()),
                None => server.address.to_string(),
            };
            line(up.out, b"Host", host.as_bytes());
        }
    }
    if router.is_websphere() {
        let client = ctx.client.or(peer);
        let tagged =
            crate::pipeline::tag_request(router, up, ctx.outcome, client, local, secure, http2);
        if let (true, Some(m)) = (tagged, &ctx.metrics) {
            m.wsfo_tagged();
        }
    }
}
