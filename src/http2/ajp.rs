//! One try of an HTTP/2 stream's request to a server that speaks AJP/1.3: the request as
//! `FORWARD_REQUEST` (`protocol` `HTTP/2.0`; the host from `:authority`), the body in
//! packets as the server asks, then the answer's head and body sent on the stream within
//! the client's window. A body larger than what was read before the try streams from the
//! client as the server asks for it, and the request is not sent again after that.

use super::exchange::{response, Exchange, ResetWatch};
use super::{send, Http2};
use crate::ajp::{self, Message};
use crate::config::Ajp;
use crate::http1::head::Refusal;
use crate::pipeline::{self, Failure, Relayed, RequestCtx, Stop};
use crate::proxy::write_on_stack;
use crate::upstream::ajp::Packets;
use crate::upstream::{self, pool};
use bytes::Bytes;
use log::warn;

/// Fields that AJP carries otherwise or that are of the client's hop.
const HOP: [&str; 6] = [
    "connection",
    "te",
    "trailer",
    "upgrade",
    "transfer-encoding",
    "expect",
];

const HEAD_TOO_LARGE: Refusal = Refusal {
    status: 431,
    why: "431 Request Header Fields Too Large: the request does not fit the AJP packet size\n",
};

pub(super) async fn attempt(
    h2: &Http2,
    x: &mut Exchange<'_>,
    ctx: &mut RequestCtx,
    settings: &Ajp,
) -> Result<Relayed, Failure> {
    let router = ctx.router.clone().expect("a routed request");
    let timeouts = router.timeouts();
    let max = settings.packet_size;
    let connected = upstream::ajp::connection(&h2.connector, ctx, settings).await?;
    let (mut up, reused, key) = (connected.stream, connected.reused, connected.key);
    let first_len = x.upload.first().len();
    // The body's length for Tomcat, when it is known.
    let whole = x.upload.is_done().then_some(first_len);
    if forward(x, ctx, settings, whole).is_err() {
        warn!(
            "cluster {}: a request head does not fit the AJP packet size ({max} bytes): 431",
            router.name
        );
        return Err(Failure::Body(Stop::Refused(HEAD_TOO_LARGE)));
    }
    let mut sent = first_len.min(max - 6);
    if sent > 0 {
        let _ = ajp::body_packet(&mut x.out, &x.upload.first()[..sent], max);
    }
    if let Err(e) = upstream::write_all(&mut up, &x.out, timeouts.read).await {
        if reused {
            return Err(Failure::Stale);
        }
        warn!("cluster {}: writing the request failed: {e}", router.name);
        return Err(Failure::Upstream(502, "writing the request failed"));
    }
    let mut packets = Packets::new();
    let limits = (max, timeouts.read, reused);
    let head_request = x.parts.method == http::Method::HEAD;
    let (status, mut sending, mut ended) = loop {
        let mut client = ResetWatch(x.respond);
        let range = packets
            .next(&mut up, &mut x.buf, limits, &mut client)
            .await?;
        let message =
            ajp::response::parse(&x.buf[range]).map_err(|m| Failure::Upstream(502, m.0))?;
        match message {
            Message::GetBody(n) => {
                let want = usize::from(n).min(max - 6);
                let wrote = if sent < first_len {
                    let k = want.min(first_len - sent);
                    x.out.clear();
                    let data = &x.upload.first()[sent..sent + k];
                    let _ = ajp::body_packet(&mut x.out, data, max);
                    sent += k;
                    upstream::write_all(&mut up, &x.out, timeouts.read).await
                } else {
                    // The rest streams from the client as the server asks for it.
                    let more = x.upload.more(want, &ctx.limits, ctx.start, &mut x.out);
                    more.await.map_err(Failure::Body)?;
                    let header = ajp::body_packet_header(x.out.len() as u16);
                    match upstream::write_all(&mut up, &header, timeouts.read).await {
                        Ok(()) if !x.out.is_empty() => {
                            upstream::write_all(&mut up, &x.out, timeouts.read).await
                        }
                        r => r,
                    }
                };
                if wrote.is_err() {
                    return Err(Failure::Upstream(502, "writing the request body failed"));
                }
            }
            Message::Headers { status, fields, .. } => {
                let method = x.parts.method.as_str().as_bytes();
                let may_retry = || pipeline::idempotent(method);
                if !upstream::ajp::heard(ctx, status, fields.clone(), may_retry)? {
                    continue;
                }
                let no_body = head_request || status == 204 || status == 304;
                let head = response(status, fields);
                match x.respond.send_response(head, no_body) {
                    Ok(s) => break (status, s, no_body),
                    Err(_) => return Err(Failure::Client(499)),
                }
            }
            _ => {
                return Err(Failure::Upstream(
                    502,
                    "an AJP message before the answer's head",
                ))
            }
        }
    };
    let reuse = loop {
        // Once the head is sent, the stream's sending half is what a reset ends.
        let mut client = SendingWatch(&mut sending);
        let range = match packets.next(&mut up, &mut x.buf, limits, &mut client).await {
            Ok(r) => r,
            Err(f) => {
                warn!("cluster {}: the answer's body over AJP: {f:?}", router.name);
                sending.send_reset(h2::Reason::INTERNAL_ERROR);
                return Err(Failure::Client(status));
            }
        };
        match ajp::response::parse(&x.buf[range]) {
            Ok(Message::Body(data)) if !data.is_empty() && !ended => {
                let data = Bytes::copy_from_slice(data);
                if send::data(&mut sending, data, false, &ctx.limits, &h2.name)
                    .await
                    .is_err()
                {
                    return Err(Failure::Client(status));
                }
            }
            Ok(Message::Body(_)) => {}
            Ok(Message::End { reuse }) => break reuse,
            Ok(Message::GetBody(_)) => {
                x.out.clear();
                x.out.extend_from_slice(&ajp::END_OF_BODY);
                let _ = upstream::write_all(&mut up, &x.out, timeouts.read).await;
            }
            Ok(_) | Err(_) => {
                warn!("cluster {}: a broken AJP answer body", router.name);
                sending.send_reset(h2::Reason::INTERNAL_ERROR);
                return Err(Failure::Client(status));
            }
        }
    };
    if !ended {
        ended = sending.send_data(Bytes::new(), true).is_ok();
    }
    if reuse && ended && packets.clean() && x.upload.is_done() {
        pool::put(key, up, h2.pool_size, timeouts.idle);
    }
    Ok(Relayed {
        status,
        client_keep: true,
    })
}

/// The stream, once its head is sent, while the server works: gone when the client resets
/// it.
struct SendingWatch<'a>(&'a mut h2::SendStream<Bytes>);

impl upstream::Watch for SendingWatch<'_> {
    fn poll_gone(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        self.0.poll_reset(cx).map(|_| ())
    }
}

/// The request as `FORWARD_REQUEST`, in `x.out` (cleared); `length`: the body's, when it
/// was read whole.
fn forward(
    x: &mut Exchange<'_>,
    ctx: &RequestCtx,
    settings: &Ajp,
    length: Option<usize>,
) -> Result<(), ajp::TooLarge> {
    let parts = x.parts;
    let host = match parts.headers.get(http::header::HOST) {
        Some(h) => Some(h.as_bytes()),
        None => parts.uri.authority().map(|a| a.as_str().as_bytes()),
    };
    let request = upstream::ajp::Request {
        method: parts.method.as_str().as_bytes(),
        protocol: b"HTTP/2.0",
        path: parts.uri.path().as_bytes(),
        query: parts.uri.query().map(str::as_bytes),
        host,
    };
    // The host as a field too, and the body's length when the client gave none: Tomcat
    // reads a body over AJP by its length.
    let authority = (!parts.headers.contains_key(http::header::HOST))
        .then_some(host)
        .flatten();
    let mut digits = [0u8; 48];
    let declared = parts.headers.contains_key(http::header::CONTENT_LENGTH);
    let length = length
        .filter(|&n| n > 0 && !declared)
        .map(|n| write_on_stack(&mut digits, n));
    let fields = || {
        let own = parts.headers.iter().filter_map(|(name, value)| {
            let name = name.as_str().as_bytes();
            let hop = HOP.iter().any(|h| name == h.as_bytes());
            let websphere = name.len() >= 3 && name[..3].eq_ignore_ascii_case(b"$ws");
            (!hop && !websphere).then_some((name, value.as_bytes()))
        });
        let host = authority.map(|a| (&b"host"[..], a));
        let length = length.map(|l| (&b"content-length"[..], l));
        host.into_iter().chain(length).chain(own)
    };
    let link = (x.link.peer, x.link.local, x.link.tls.clone());
    upstream::ajp::forward(&mut x.out, ctx, settings, (request, link), fields)
}
