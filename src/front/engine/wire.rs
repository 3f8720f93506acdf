//! The request head tether's engine sends upstream, written straight into the connection's
//! write buffer: the client's request line and fields in their order and case, less what
//! `upstream::request_head` leaves out (hop-by-hop fields, those its `Connection`
//! nominates included, `$WS*` fields and the fields tether sets itself), then tether's
//! edits.

use crate::pipeline::upstream::request_head::{dropped, framing, line, Replaced, Source, Upstream};
use crate::wire::http1::connection;
use crate::wire::http1::framing::Body;
use crate::wire::http1::head::RequestHead;

/// The client's head in its read buffer, as the edits read it.
pub struct Client<'a> {
    pub head: &'a RequestHead,
    pub buf: &'a [u8],
}

impl Source for Client<'_> {
    #[inline]
    fn first(&self, name: &str) -> Option<&[u8]> {
        self.head.values(self.buf, name).next()
    }
}

/// Starts the head in `out` (cleared): the request line and the client's fields that
/// pass, then the framing of `body`.
pub fn start<'a>(
    client: &'a Client<'a>,
    body: Body,
    replaced: &Replaced,
    out: &'a mut Vec<u8>,
) -> Upstream<'a, Client<'a>> {
    let (head, buf) = (client.head, client.buf);
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
    framing(out, body);
    if replaced.upgrade {
        line(out, b"Connection", b"Upgrade");
    }
    Upstream::new(client, out)
}
