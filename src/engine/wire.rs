//! The request head tether's engine sends upstream, written straight into the connection's
//! write buffer: the client's request line and fields in their order and case, less its
//! hop-by-hop fields (RFC 9110 §7.6.1, those its `Connection` nominates included), its
//! `$WS*` fields and the fields tether sets
//! itself, then tether's edits (`proxy::upstream_fields`, the same code pingora-proxy's
//! path runs).

use super::answer::field as line;
use crate::http1::connection;
use crate::http1::framing::Body;
use crate::http1::head::RequestHead;
use crate::proxy::UpstreamFields;

/// Fields of the client's hop only; never relayed. (`Expect: 100-continue` is answered
/// by the engine, and the only expectation it takes.)
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
fn dropped(name: &[u8], replaced: &Replaced) -> bool {
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

/// The upstream head being written: the client's head (for what the edits read) and the
/// buffer.
pub struct Upstream<'a> {
    head: &'a RequestHead,
    buf: &'a [u8],
    pub out: &'a mut Vec<u8>,
}

impl<'a> Upstream<'a> {
    /// Starts the head in `out` (cleared): the request line and the client's fields that
    /// pass, then the framing of `body`.
    pub fn start(
        head: &'a RequestHead,
        buf: &'a [u8],
        body: Body,
        replaced: &Replaced,
        out: &'a mut Vec<u8>,
    ) -> Self {
        out.clear();
        out.extend_from_slice(head.method.of(buf));
        out.push(b' ');
        out.extend_from_slice(head.target.of(buf));
        out.extend_from_slice(b" HTTP/1.1\r\n");
        for (name, value) in head.fields(buf) {
            if replaced.upgrade && name.eq_ignore_ascii_case(b"upgrade") {
                line(out, name, value);
                continue;
            }
            let nominated =
                replaced.nominated && connection::nominates(head.values(buf, "connection"), name);
            if !nominated && !dropped(name, replaced) {
                line(out, name, value);
            }
        }
        match body {
            Body::Length(n) => {
                let mut digits = [0u8; 48];
                let n = crate::proxy::write_on_stack(&mut digits, n);
                line(out, b"Content-Length", n);
            }
            Body::Chunked => line(out, b"Transfer-Encoding", b"chunked"),
            Body::Empty => {}
        }
        if replaced.upgrade {
            line(out, b"Connection", b"Upgrade");
        }
        Upstream { head, buf, out }
    }

    /// Ends the head (the empty line).
    pub fn finish(self) {
        self.out.extend_from_slice(b"\r\n");
    }

    fn client(&self, name: &str) -> Option<&'a [u8]> {
        self.head.values(self.buf, name).next()
    }
}

/// The client's fields that tether replaces were left out when the head was started, so
/// setting one is writing it, and removing one is already done.
impl UpstreamFields for Upstream<'_> {
    fn get(&self, name: &str) -> Option<&[u8]> {
        self.client(name)
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
        let old = self.client(name);
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
        match self.client(from) {
            Some(v) => {
                line(self.out, to.as_bytes(), v);
                true
            }
            None => false,
        }
    }

    fn remove(&mut self, _name: &str) {}
}
