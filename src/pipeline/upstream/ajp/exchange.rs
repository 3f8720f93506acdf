//! One try over AJP/1.3, the same for every front end: a connection (asked with a CPing as
//! configured), the `FORWARD_REQUEST` with the body's first packet, the rest of the body
//! as the server asks for it (whenever it asks, after the answer's head too), then the
//! answer's head and body handed to the client as they come, held to the answer's own
//! `Content-Length`. What differs between front ends (how the request is written, where
//! its body comes from, how the client is watched and answered) is theirs: [`ClientSide`].

use super::{connection, heard, AjpFields, Packets};
use crate::config::Ajp;
use crate::pipeline::compress::{self, Encoder, Plan};
use crate::pipeline::upstream::{pool, write_all, Watch};
use crate::pipeline::{Failure, Relayed, RequestCtx, Stop};
use crate::wire::ajp::{self, Message, ResponseHeaders, TooLarge};
use crate::wire::http1::head::Refusal;
use log::warn;
use pingora_core::connectors::TransportConnector;
use pingora_core::protocols::Stream;
use std::ops::Range;
use std::time::Duration;

const HEAD_TOO_LARGE: Refusal = Refusal {
    status: 431,
    why: "431 Request Header Fields Too Large: the request does not fit the AJP packet size\n",
};

/// The client's side of a try over AJP, as a front end carries it.
#[allow(async_fn_in_trait)]
pub trait ClientSide {
    /// Writes the request as `FORWARD_REQUEST` into [`out`](Self::out) (cleared).
    fn forward(&mut self, ctx: &RequestCtx, settings: &Ajp) -> Result<(), TooLarge>;
    /// The length of the body's part read before the try.
    fn first_len(&self) -> usize;
    /// Appends the body packet of `range` of that part to [`out`](Self::out).
    fn first_packet(&mut self, range: Range<usize>, max: usize);
    /// What goes to the server next.
    fn out(&mut self) -> &mut Vec<u8>;
    /// Nothing more of the body is to come from the client.
    fn body_done(&self) -> bool;
    /// Part of the body went past its first part: the request cannot go again.
    fn streamed(&self) -> bool;
    /// Is the request's method idempotent?
    fn idempotent(&self) -> bool;
    /// Up to `want` more bytes of the body from the client, in [`out`](Self::out) (empty
    /// at the body's end).
    async fn more(&mut self, want: usize, ctx: &RequestCtx) -> Result<(), Stop>;
    /// The client, watched while the server works.
    fn watch(&mut self) -> impl Watch + '_;
    /// The answer's head, framed by `length` when the server gave one and edited as
    /// `plan` says when compression is on: does the client take a body after it (not after
    /// a HEAD, 204 or 304)? `Err`: the client is gone.
    async fn head(
        &mut self,
        status: u16,
        fields: ResponseHeaders<'_>,
        length: Option<u64>,
        plan: Option<Plan>,
    ) -> Result<bool, ()>;
    /// Sends what of the answer the front end holds back (before [`out`](Self::out) is
    /// used for the server again).
    async fn flush(&mut self) -> Result<(), ()>;
    /// A part of the answer's body.
    async fn data(&mut self, data: &[u8]) -> Result<(), ()>;
    /// The answer's end.
    async fn end(&mut self) -> Result<(), ()>;
    /// Something of the answer reached the client.
    fn started(&self) -> bool;
    /// The answer broke off after it started: the client's side ends as broken.
    fn abort(&mut self);
    /// May the client's connection carry another request after this answer?
    fn client_keep(&self) -> bool;
    /// Most idle connections kept per server and thread.
    fn pool_size(&self) -> usize;
}

/// The body's first part, as it goes to the server.
struct First {
    len: usize,
    sent: usize,
}

/// One try: `buf` is the front end's buffer for the server's packets.
pub async fn exchange<C: ClientSide>(
    client: &mut C,
    buf: &mut Vec<u8>,
    connector: &TransportConnector,
    ctx: &mut RequestCtx,
    settings: &Ajp,
) -> Result<Relayed, Failure> {
    let router = ctx.router.clone().expect("a routed request");
    let timeouts = router.timeouts();
    let max = settings.packet_size;
    let connected = connection(connector, ctx, settings).await?;
    let (mut up, reused, key) = (connected.stream, connected.reused, connected.key);
    if client.forward(ctx, settings).is_err() {
        warn!(
            "cluster {}: a request head does not fit the AJP packet size ({max} bytes): 431",
            router.name
        );
        return Err(Failure::Body(Stop::Refused(HEAD_TOO_LARGE)));
    }
    // The first body packet goes with the request; the rest when the server asks.
    let len = client.first_len();
    let mut first = First {
        len,
        sent: len.min(max - 6),
    };
    if first.sent > 0 {
        client.first_packet(0..first.sent, max);
    }
    if let Err(e) = write_all(&mut up, client.out(), timeouts.read).await {
        if reused {
            return Err(Failure::Stale);
        }
        warn!("cluster {}: writing the request failed: {e}", router.name);
        return Err(Failure::Dropped("writing the request failed"));
    }
    let mut packets = Packets::new();
    let limits = (max, timeouts.read, reused);
    let writes = (max, timeouts.read);
    // The head, answering the server's requests for the body first.
    let mut encoder: Option<Encoder>;
    let (status, mut left, body) = loop {
        let next = packets
            .next(&mut up, buf, limits, &mut client.watch())
            .await;
        let range = match next {
            // Once the body streamed, nothing is sent again.
            Err(failure) if client.streamed() => return Err(failure.unsendable()),
            // A server that failed before its answer's head (closed, reset, or broke a
            // packet after asking for the body): as if it had not answered.
            Err(Failure::Upstream(502, why)) if !client.streamed() => {
                return Err(Failure::Dropped(why))
            }
            r => r?,
        };
        match ajp::response::parse(&buf[range]).map_err(|m| Failure::Junk(m.0))? {
            Message::GetBody(n) => send_body(client, &mut up, &mut first, n, ctx, writes).await?,
            Message::Headers { status, fields, .. } => {
                let may_retry = !client.streamed() && client.idempotent();
                if !heard(ctx, status, fields.clone(), || may_retry)? {
                    continue;
                }
                let length = content_length(fields.clone());
                let plan = ctx.compress.as_ref().and_then(|asked| {
                    compress::plan(asked, false, status, &AjpFields(fields.clone()))
                });
                encoder = plan.and_then(Encoder::of);
                // A compressed body's length is not known ahead.
                let framed = length.filter(|_| encoder.is_none());
                let body = match client.head(status, fields, framed, plan).await {
                    Ok(body) => body,
                    Err(()) => return Err(Failure::Client(499)),
                };
                if !body {
                    encoder = None;
                }
                break (status, length.filter(|_| body), body);
            }
            _ => return Err(Failure::Junk("an AJP message before the answer's head")),
        }
    };
    // What the answer's `Content-Length` still allows: the client reads no more than that,
    // so a server that sends more (or less) has the client's side broken off, never bytes
    // of its own taken for the next answer.
    let reuse = loop {
        let next = packets
            .next(&mut up, buf, limits, &mut client.watch())
            .await;
        let range = match next {
            Ok(r) => r,
            Err(Failure::Client(_)) => return Err(Failure::Client(status)),
            // Nothing of the answer reached the client: the request may go to another
            // server as if this one had not answered (an idempotent one, as mod_jk's
            // recovery sends it; the server is marked down).
            Err(Failure::Upstream(502, why)) if !client.started() && !client.streamed() => {
                return Err(Failure::Dropped(why))
            }
            Err(f) if !client.started() => return Err(f),
            Err(f) => {
                warn!("cluster {}: the answer's body over AJP: {f:?}", router.name);
                return Err(broken(client, status, "the answer's body failed"));
            }
        };
        let message = match ajp::response::parse(&buf[range]) {
            Ok(m) => m,
            Err(m) => return Err(broken(client, status, m.0)),
        };
        match message {
            Message::Body(data) if !data.is_empty() && body => {
                if let Some(n) = left.as_mut() {
                    if data.len() as u64 > *n {
                        let why = "an answer's body longer than its Content-Length";
                        return Err(broken(client, status, why));
                    }
                    *n -= data.len() as u64;
                }
                let sent = match &mut encoder {
                    Some(e) => match e.push(data, false) {
                        Ok(squeezed) if squeezed.is_empty() => Ok(()),
                        Ok(squeezed) => client.data(&squeezed).await,
                        Err(_) => return Err(broken(client, status, "compressing failed")),
                    },
                    None => client.data(data).await,
                };
                if sent.is_err() {
                    return Err(Failure::Client(status));
                }
            }
            // An empty chunk is a flush (each part goes on as it comes); a body after a
            // HEAD, 204 or 304 is dropped.
            Message::Body(_) => {}
            Message::End { .. } if left.is_some_and(|n| n > 0) => {
                let why = "an answer's body shorter than its Content-Length";
                return Err(broken(client, status, why));
            }
            Message::End { reuse } => break reuse,
            // A servlet may read the body after it answered: it gets it.
            Message::GetBody(n) => {
                let sent = send_body(client, &mut up, &mut first, n, ctx, writes).await;
                if let Err(f) = sent {
                    warn!(
                        "cluster {}: the body after the answer's head: {f:?}",
                        router.name
                    );
                    return Err(broken(client, status, "writing the request body failed"));
                }
            }
            _ => {
                let why = "an AJP message inside the answer's body";
                return Err(broken(client, status, why));
            }
        }
    };
    if let Some(mut e) = encoder {
        let last = match e.push(&[], true) {
            Ok(last) => last,
            Err(_) => return Err(broken(client, status, "compressing failed")),
        };
        if !last.is_empty() && client.data(&last).await.is_err() {
            return Err(Failure::Client(status));
        }
    }
    if client.end().await.is_err() {
        return Err(Failure::Client(status));
    }
    if reuse && packets.clean() && client.body_done() {
        pool::put(key, up, client.pool_size(), timeouts.idle);
    }
    Ok(Relayed {
        status,
        client_keep: client.client_keep(),
    })
}

/// Answers a `GET_BODY_CHUNK` for up to `n` bytes: from the first part while it lasts,
/// then from the client as it sends, then the empty packet that ends the body.
async fn send_body<C: ClientSide>(
    client: &mut C,
    up: &mut Stream,
    first: &mut First,
    n: u16,
    ctx: &RequestCtx,
    (max, timeout): (usize, Duration),
) -> Result<(), Failure> {
    if client.flush().await.is_err() {
        return Err(Failure::Client(499));
    }
    let want = usize::from(n).min(max - 6);
    let wrote = if first.sent < first.len {
        let k = want.min(first.len - first.sent);
        client.out().clear();
        client.first_packet(first.sent..first.sent + k, max);
        first.sent += k;
        write_all(up, client.out(), timeout).await
    } else if !client.body_done() {
        client.more(want, ctx).await.map_err(Failure::Body)?;
        let header = ajp::body_packet_header(client.out().len() as u16);
        match write_all(up, &header, timeout).await {
            Ok(()) if !client.out().is_empty() => write_all(up, client.out(), timeout).await,
            r => r,
        }
    } else {
        write_all(up, &ajp::END_OF_BODY, timeout).await
    };
    wrote.map_err(|_| Failure::Upstream(502, "writing the request body failed"))
}

/// The answer's `Content-Length`, when it is one number.
fn content_length(fields: ResponseHeaders<'_>) -> Option<u64> {
    let (_, value) = fields
        .into_iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(b"content-length"))?;
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

/// An answer that broke its own framing: 502 while nothing of it reached the client, else
/// the client's side is broken off (its status logged).
fn broken<C: ClientSide>(client: &mut C, status: u16, why: &'static str) -> Failure {
    if !client.started() {
        return Failure::Upstream(502, why);
    }
    warn!("{why} over AJP: the client's side is broken off");
    client.abort();
    Failure::Client(status)
}
