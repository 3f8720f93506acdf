//! One try of a request on tether's engine to a server that speaks AJP/1.3: the request as
//! `FORWARD_REQUEST` (the client's facts as AJP carries them natively: its address, the
//! host and port it addressed, its TLS and certificate, the route chosen, the connector's
//! secret) with the body's first packet, the rest of the body as the server asks for it,
//! then the answer's head written for the client as HTTP/1.1 and its body relayed, framed
//! by its `Content-Length` or chunked.
//!
//! A body larger than `request_buffer`, or chunked, is read from the client as the server
//! asks for it (de-chunked: AJP carries data), and then the request is not sent again.
//! Upgrades are not carried over AJP (501).

use super::answer;
use super::conn::{to_client, Conn};
use super::exchange::Request;
use crate::ajp::{self, Message};
use crate::config::Ajp;
use crate::http1::framing::Body;
use crate::http1::head::Refusal;
use crate::pipeline::{Failure, Relayed, RequestCtx, Stop};
use crate::proxy::write_on_stack;
use crate::upstream::ajp::Packets;
use crate::upstream::{self, pool};
use log::warn;
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
const HEAD_TOO_LARGE: Refusal = Refusal {
    status: 431,
    why: "431 Request Header Fields Too Large: the request does not fit the AJP packet size\n",
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
    let router = ctx.router.clone().expect("a routed request");
    let timeouts = router.timeouts();
    let max = settings.packet_size;
    let connected = upstream::ajp::connection(connector, ctx, settings).await?;
    let (mut up, reused, key) = (connected.stream, connected.reused, connected.key);
    // The body's first part: in the read buffer, or (chunked) its data decoded once.
    let decoded = match req.upload.body {
        Body::Chunked => Some(req.upload.first_data(&c.buf).into_owned()),
        _ => None,
    };
    let part = c.head.len..req.upload.used();
    let first_len = decoded.as_ref().map_or(part.len(), Vec::len);
    if forward(c, ctx, req, settings).is_err() {
        warn!(
            "cluster {}: a request head does not fit the AJP packet size ({max} bytes): 431",
            router.name
        );
        return Err(Failure::Body(Stop::Refused(HEAD_TOO_LARGE)));
    }
    // The first body packet goes with the request; the rest when the server asks.
    let mut sent = first_len.min(max - 6);
    if sent > 0 {
        let data = match &decoded {
            Some(d) => &d[..sent],
            None => &c.buf[part.start..part.start + sent],
        };
        let _ = ajp::body_packet(&mut c.out, data, max);
    }
    if let Err(e) = upstream::write_all(&mut up, &c.out, timeouts.read).await {
        if reused {
            return Err(Failure::Stale);
        }
        warn!("cluster {}: writing the request failed: {e}", router.name);
        return Err(Failure::Upstream(502, "writing the request failed"));
    }
    let mut packets = Packets::new();
    let limits = (max, timeouts.read, reused);
    // The head, answering the server's requests for body first.
    let (status, length) = loop {
        let range = {
            let Conn {
                stream,
                buf,
                end,
                up_buf,
                ..
            } = &mut *c;
            // While the body is still the client's to send, its bytes are the body's, not
            // a next request to read ahead: the client is not read then.
            let buf: &mut [u8] = match req.upload.is_done() {
                true => buf,
                false => &mut [],
            };
            let mut client = super::exchange::Watched { stream, buf, end };
            match packets.next(&mut up, up_buf, limits, &mut client).await {
                // Once the body streamed, nothing is sent again.
                Err(Failure::Stale) if req.upload.streamed() => {
                    return Err(Failure::Upstream(502, "the server closed the connection"))
                }
                r => r?,
            }
        };
        let message =
            ajp::response::parse(&c.up_buf[range]).map_err(|m| Failure::Upstream(502, m.0))?;
        match message {
            Message::GetBody(n) => {
                let want = usize::from(n).min(max - 6);
                let wrote = if sent < first_len {
                    let k = want.min(first_len - sent);
                    let data = match &decoded {
                        Some(d) => &d[sent..sent + k],
                        None => &c.buf[part.start + sent..part.start + sent + k],
                    };
                    c.out.clear();
                    let _ = ajp::body_packet(&mut c.out, data, max);
                    sent += k;
                    upstream::write_all(&mut up, &c.out, timeouts.read).await
                } else if !req.upload.is_done() {
                    // The rest streams from the client as the server asks for it.
                    let since = ctx.start;
                    let more = req.upload.more(c, want, &req.limits, since).await;
                    more.map_err(Failure::Body)?;
                    let len = c.out.len() as u16;
                    let header = ajp::body_packet_header(len);
                    match upstream::write_all(&mut up, &header, timeouts.read).await {
                        Ok(()) if len > 0 => {
                            upstream::write_all(&mut up, &c.out, timeouts.read).await
                        }
                        r => r,
                    }
                } else {
                    upstream::write_all(&mut up, &ajp::END_OF_BODY, timeouts.read).await
                };
                if wrote.is_err() {
                    return Err(Failure::Upstream(502, "writing the request body failed"));
                }
            }
            Message::Headers { status, fields, .. } => {
                let streamed = req.upload.streamed();
                let may_retry = || !streamed && super::exchange::idempotent(c);
                if !upstream::ajp::heard(ctx, status, fields.clone(), may_retry)? {
                    continue;
                }
                let length = client_head(&mut c.out, status, fields, req);
                break (status, length);
            }
            _ => {
                return Err(Failure::Upstream(
                    502,
                    "an AJP message before the answer's head",
                ))
            }
        }
    };
    let chunked = length.is_none() && has_body(status, req) && !req.http10;
    let client_keep = req.keeps() && (length.is_some() || chunked || !has_body(status, req));
    if !client_keep {
        answer::field(&mut c.out, b"Connection", b"close");
    } else if req.http10 {
        answer::field(&mut c.out, b"Connection", b"keep-alive");
    }
    if chunked {
        answer::field(&mut c.out, b"Transfer-Encoding", b"chunked");
    }
    c.out.extend_from_slice(b"\r\n");
    let mut head_out = false;
    // What the answer's `Content-Length` still allows: the client reads no more than that,
    // so a server that sends more (or less) has the client's connection closed, never
    // bytes of its own taken for the next answer.
    let mut left = length;
    let reuse = loop {
        let range = {
            let Conn {
                stream,
                buf,
                end,
                up_buf,
                ..
            } = &mut *c;
            let mut client = super::exchange::Watched { stream, buf, end };
            match packets.next(&mut up, up_buf, limits, &mut client).await {
                Ok(r) => r,
                Err(Failure::Client(_)) => return Err(Failure::Client(status)),
                Err(f) => {
                    warn!("cluster {}: the answer's body over AJP: {f:?}", router.name);
                    return Err(Failure::Client(status));
                }
            }
        };
        let message = match ajp::response::parse(&c.up_buf[range.clone()]) {
            Ok(m) => m,
            Err(m) => {
                warn!("cluster {}: {}", router.name, m.0);
                return Err(Failure::Client(status));
            }
        };
        match message {
            Message::Body(data) if !data.is_empty() && has_body(status, req) => {
                if let Some(n) = left.as_mut() {
                    if data.len() as u64 > *n {
                        let why = "an answer's body longer than its Content-Length";
                        return Err(cut(head_out, status, why));
                    }
                    *n -= data.len() as u64;
                }
                if !head_out {
                    head_out = true;
                } else {
                    c.out.clear();
                }
                if chunked {
                    let mut size = [0u8; 48];
                    let size = write_on_stack(&mut size, format_args!("{:x}", data.len()));
                    c.out.extend_from_slice(size);
                    c.out.extend_from_slice(b"\r\n");
                }
                let (start, len) = (range.start + 3, data.len());
                c.out.extend_from_slice(&c.up_buf[start..start + len]);
                if chunked {
                    c.out.extend_from_slice(b"\r\n");
                }
                if to_client(&mut c.stream, &c.out, &req.limits, listener)
                    .await
                    .is_err()
                {
                    return Err(Failure::Client(status));
                }
            }
            Message::Body(_) => {}
            Message::End { .. } if left.is_some_and(|n| n > 0) => {
                let why = "an answer's body shorter than its Content-Length";
                return Err(cut(head_out, status, why));
            }
            Message::End { reuse } => break reuse,
            Message::GetBody(_) => {
                c.out.clear();
                c.out.extend_from_slice(&ajp::END_OF_BODY);
                let _ = upstream::write_all(&mut up, &c.out, timeouts.read).await;
            }
            _ => {
                warn!(
                    "cluster {}: an AJP message inside the answer's body",
                    router.name
                );
                return Err(Failure::Client(status));
            }
        }
    };
    if !head_out {
        // No body: the head alone (or with the chunked body's end).
        if chunked {
            c.out.extend_from_slice(b"0\r\n\r\n");
        }
    } else {
        c.out.clear();
        if chunked {
            c.out.extend_from_slice(b"0\r\n\r\n");
        }
    }
    if !c.out.is_empty()
        && to_client(&mut c.stream, &c.out, &req.limits, listener)
            .await
            .is_err()
    {
        return Err(Failure::Client(status));
    }
    if reuse && packets.clean() && req.upload.is_done() {
        pool::put(key, up, req.pool_size, timeouts.idle);
    }
    Ok(Relayed {
        status,
        client_keep,
    })
}

/// A server's answer that breaks its own framing: 502 while nothing of it went out, else
/// the client's connection is cut (its status logged).
fn cut(head_out: bool, status: u16, why: &'static str) -> Failure {
    match head_out {
        false => Failure::Upstream(502, why),
        true => {
            warn!("{why} over AJP: the client's connection is cut");
            Failure::Client(status)
        }
    }
}

/// Does an answer with `status` to this request carry a body?
fn has_body(status: u16, req: &Request) -> bool {
    !req.head_request && status != 204 && status != 304 && status >= 200
}

/// The client's head from the server's, in `out` (less its empty line): the status line
/// and the fields, less those of the server's hop and `$WS*`. The answer's length, when
/// the server gave one.
fn client_head(
    out: &mut Vec<u8>,
    status: u16,
    fields: ajp::ResponseHeaders<'_>,
    req: &Request,
) -> Option<u64> {
    answer::status_line(out, status);
    let mut length = None;
    for (name, value) in fields {
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        if is(b"connection") || is(b"keep-alive") || is(b"transfer-encoding") {
            continue;
        }
        if name.len() >= 3 && name[..3].eq_ignore_ascii_case(b"$ws") {
            continue;
        }
        if is(b"content-length") {
            length = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.trim().parse().ok());
            if length.is_none() {
                continue;
            }
        }
        answer::field(out, name, value);
    }
    // A length does not frame an answer without a body, but is passed on (HEAD).
    length.filter(|_| has_body(status, req))
}

/// The request as `FORWARD_REQUEST`, in `c.out` (cleared).
fn forward(
    c: &mut Conn,
    ctx: &RequestCtx,
    req: &Request,
    settings: &Ajp,
) -> Result<(), ajp::TooLarge> {
    let (head, buf) = (&c.head, &c.buf[..]);
    let target = crate::http1::target::origin(head.target.of(buf));
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
