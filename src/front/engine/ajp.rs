//! The engine's side of a try over AJP/1.3 (the try itself is `upstream::ajp::exchange`'s):
//! the request as `FORWARD_REQUEST` from the connection's buffers, the body's first part
//! from the read buffer (decoded once when chunked) and the rest read from the client as
//! the server asks for it, and the answer written for the client as HTTP/1.1, framed by
//! its `Content-Length`, else chunked (until close for HTTP/1.0). Upgrades are not carried
//! over AJP (501).

use super::answer;
use super::conn::{to_client, Conn};
use super::exchange::Request;
use crate::config::Ajp;
use crate::pipeline::compress::Plan;
use crate::pipeline::upstream;
use crate::pipeline::{Failure, Relayed, RequestCtx, Stop};
use crate::wire::ajp;
use crate::wire::http1::chunked;
use crate::wire::http1::framing::Body;
use crate::wire::http1::head::Refusal;
use pingora_core::connectors::TransportConnector;

/// Fields of the client's hop only, or that AJP carries otherwise; never sent.
const HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
    "transfer-encoding",
    "expect",
];

const NO_UPGRADE: Refusal = Refusal {
    status: 501,
    why: "501 Not Implemented: upgrades are not carried over AJP\n",
};

pub(super) async fn attempt(
    connector: &TransportConnector,
    listener: &str,
    c: &mut Conn,
    ctx: &mut RequestCtx,
    req: &mut Request,
    settings: &Ajp,
) -> Result<Relayed, Failure> {
    if req.upgrade {
        return Err(Failure::Body(Stop::Refused(NO_UPGRADE)));
    }
    // The body's first part: in the read buffer, or (chunked) its data decoded once.
    let decoded = match req.upload.body {
        Body::Chunked => Some(req.upload.first_data(&c.buf).into_owned()),
        _ => None,
    };
    let part = c.head.len..req.upload.used();
    // The server's packets are read into the connection's server buffer, lent for the
    // try (it is the record's again after it).
    let mut buf = std::mem::take(&mut c.up_buf);
    let mut side = Side {
        c,
        req,
        listener,
        first: match decoded {
            Some(data) => First::Decoded(data),
            None => First::Read(part),
        },
        chunked: false,
        client_keep: false,
        pending: false,
        started: false,
    };
    let relayed = upstream::ajp::exchange(&mut side, &mut buf, connector, ctx, settings).await;
    side.c.up_buf = buf;
    relayed
}

/// Where the body's first part is.
enum First {
    /// In the read buffer, as the client sent it.
    Read(std::ops::Range<usize>),
    /// Decoded from a chunked body.
    Decoded(Vec<u8>),
}

/// The engine's side of a try over AJP: the request from the connection's buffers, the
/// answer written as HTTP/1.1 (by its `Content-Length`, else chunked, else until close for
/// HTTP/1.0).
struct Side<'a> {
    c: &'a mut Conn,
    req: &'a mut Request,
    listener: &'a str,
    first: First,
    chunked: bool,
    client_keep: bool,
    /// The head waits in `c.out` to go out with the first part of the body.
    pending: bool,
    started: bool,
}

impl Side<'_> {
    async fn write(&mut self) -> Result<(), ()> {
        self.started = true;
        to_client(
            &mut self.c.stream,
            &self.c.out,
            &self.req.limits,
            self.listener,
        )
        .await
        .map_err(|_| ())
    }
}

impl upstream::ajp::ClientSide for Side<'_> {
    fn forward(&mut self, ctx: &RequestCtx, settings: &Ajp) -> Result<(), ajp::TooLarge> {
        forward(self.c, ctx, self.req, settings)
    }

    fn first_len(&self) -> usize {
        match &self.first {
            First::Read(part) => part.len(),
            First::Decoded(data) => data.len(),
        }
    }

    fn first_packet(&mut self, range: std::ops::Range<usize>, max: usize) {
        let data = match &self.first {
            First::Read(part) => &self.c.buf[part.start + range.start..part.start + range.end],
            First::Decoded(data) => &data[range],
        };
        let _ = ajp::body_packet(&mut self.c.out, data, max);
    }

    fn out(&mut self) -> &mut Vec<u8> {
        &mut self.c.out
    }

    fn body_done(&self) -> bool {
        self.req.upload.is_done()
    }

    fn streamed(&self) -> bool {
        self.req.upload.streamed()
    }

    fn idempotent(&self) -> bool {
        super::exchange::idempotent(self.c)
    }

    async fn more(&mut self, want: usize, ctx: &RequestCtx) -> Result<(), Stop> {
        let limits = self.req.limits;
        self.req.upload.more(self.c, want, &limits, ctx.start).await
    }

    fn watch(&mut self) -> impl upstream::Watch + '_ {
        let Conn {
            stream, buf, end, ..
        } = &mut *self.c;
        // While the body is still the client's to send, its bytes are the body's, not a
        // next request to read ahead: the client is not read then.
        let buf: &mut [u8] = match self.req.upload.is_done() {
            true => buf,
            false => &mut [],
        };
        super::exchange::Watched { stream, buf, end }
    }

    async fn head(
        &mut self,
        status: u16,
        fields: ajp::ResponseHeaders<'_>,
        length: Option<u64>,
        plan: Option<Plan>,
    ) -> Result<bool, ()> {
        let req = &*self.req;
        let out = &mut self.c.out;
        let body = has_body(status, req);
        client_head(out, status, fields, length, plan);
        if let Some(alt_svc) = &req.alt_svc {
            answer::field(out, b"Alt-Svc", alt_svc.as_bytes());
        }
        // A length does not frame an answer without a body, but is passed on (HEAD).
        let length = length.filter(|_| body);
        self.chunked = length.is_none() && body && !req.http10;
        self.client_keep = req.keeps() && (length.is_some() || self.chunked || !body);
        if !self.client_keep {
            answer::field(out, b"Connection", b"close");
        } else if req.http10 {
            answer::field(out, b"Connection", b"keep-alive");
        }
        if self.chunked {
            answer::field(out, b"Transfer-Encoding", b"chunked");
        }
        out.extend_from_slice(b"\r\n");
        self.pending = true;
        Ok(body)
    }

    async fn flush(&mut self) -> Result<(), ()> {
        if !std::mem::take(&mut self.pending) {
            return Ok(());
        }
        self.write().await
    }

    async fn data(&mut self, data: &[u8]) -> Result<(), ()> {
        // The head goes out with the first part, in one write.
        if !std::mem::take(&mut self.pending) {
            self.c.out.clear();
        }
        let out = &mut self.c.out;
        match self.chunked {
            true => chunked::chunk(out, data),
            false => out.extend_from_slice(data),
        }
        self.write().await
    }

    async fn end(&mut self) -> Result<(), ()> {
        // The head alone (no body), or the chunked body's end.
        if !std::mem::take(&mut self.pending) {
            self.c.out.clear();
        }
        if self.chunked {
            self.c.out.extend_from_slice(chunked::LAST_CHUNK);
        }
        match self.c.out.is_empty() {
            true => Ok(()),
            false => self.write().await,
        }
    }

    fn started(&self) -> bool {
        self.started
    }

    fn abort(&mut self) {
        // The connection closes after a failure once the answer started: the client
        // sees an answer cut short, never bytes of tether's own.
    }

    fn client_keep(&self) -> bool {
        self.client_keep
    }

    fn pool_size(&self) -> usize {
        self.req.pool_size
    }
}

/// Does an answer with `status` to this request carry a body?
fn has_body(status: u16, req: &Request) -> bool {
    !req.head_request && status != 204 && status != 304 && status >= 200
}

/// The client's head from the server's, in `out` (less its empty line): the status line
/// and the fields, less those of the server's hop, `$WS*`, and a `Content-Length` that is
/// not one number (`length` is the one that is).
fn client_head(
    out: &mut Vec<u8>,
    status: u16,
    fields: ajp::ResponseHeaders<'_>,
    length: Option<u64>,
    plan: Option<Plan>,
) {
    answer::status_line(out, status);
    for (name, value) in fields {
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        if is(b"connection") || is(b"keep-alive") || is(b"transfer-encoding") {
            continue;
        }
        if name.len() >= 3 && name[..3].eq_ignore_ascii_case(b"$ws") {
            continue;
        }
        if is(b"content-length") && length.is_none() {
            continue;
        }
        answer::server_field(out, name, value, plan);
    }
    answer::plan_fields(out, plan);
}

/// The request as `FORWARD_REQUEST`, in `c.out` (cleared).
fn forward(
    c: &mut Conn,
    ctx: &RequestCtx,
    req: &Request,
    settings: &Ajp,
) -> Result<(), ajp::TooLarge> {
    let (head, buf) = (&c.head, &c.buf[..]);
    let target = crate::wire::http1::target::origin(head.target.of(buf));
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(q) => (&target[..q], Some(&target[q + 1..])),
        None => (target, None),
    };
    let request = upstream::ajp::Request {
        method: head.method.of(buf),
        protocol: if req.http10 { b"HTTP/1.0" } else { b"HTTP/1.1" },
        path,
        query,
        host: head.values(buf, "host").next(),
    };
    let link = (c.peer, c.local, c.tls());
    let fields = || {
        head.fields(buf).filter(|(name, _)| {
            let hop = HOP.iter().any(|h| name.eq_ignore_ascii_case(h.as_bytes()));
            let websphere = name.len() >= 3 && name[..3].eq_ignore_ascii_case(b"$ws");
            !hop && !websphere
        })
    };
    upstream::ajp::forward(&mut c.out, ctx, settings, (request, link), fields)
}
