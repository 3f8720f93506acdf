//! One try of an HTTP/2 stream's request: a server connection (`crate::pipeline::upstream`), the
//! request as HTTP/1.1 (its fields, its cookies in one line, tether's edits) with the
//! body's first part, the rest of the body, then the server's answer head (interim ones
//! sent on as informational heads) and its body as data within the client's window.

use super::body::Upload;
use super::io::{RecvBody, Reset, Respond, SendBody};
use super::send;
use super::tunnel;
use super::{Link, Streams};
use crate::pipeline::compress;
use crate::pipeline::upstream::request_head::{
    self, dropped, framing, line, Replaced, Source, Upstream,
};
use crate::pipeline::upstream::{self, pool, BodyReader, Connected, ServerFields, Watch};
use crate::pipeline::Secure;
use crate::pipeline::{self, Failure, Relayed, RequestCtx};
use crate::wire::http1::response::ResponseHead;
use bytes::Bytes;
use http::request::Parts;
use log::warn;
use std::task::{Context, Poll};

/// What a stream's tries share: the request, its body, the stream to answer on, and the
/// buffers of its exchanges.
pub(super) struct Exchange<'a, B: RecvBody, R: Respond> {
    pub parts: &'a Parts,
    pub link: &'a Link,
    pub upload: &'a mut Upload<B>,
    pub respond: &'a mut R,
    pub out: Vec<u8>,
    pub buf: Vec<u8>,
    head: ResponseHead,
    /// A WebSocket's extended `CONNECT`: the `Sec-WebSocket-Key` of its upgrade.
    tunnel: Option<[u8; 24]>,
}

impl<'a, B: RecvBody, R: Respond> Exchange<'a, B, R> {
    pub fn new(
        parts: &'a Parts,
        link: &'a Link,
        upload: &'a mut Upload<B>,
        respond: &'a mut R,
        tunnel: bool,
    ) -> Self {
        Exchange {
            tunnel: tunnel.then(tunnel::key),
            parts,
            link,
            upload,
            respond,
            out: Vec::with_capacity(4096),
            buf: vec![0; 4096],
            head: ResponseHead::new(),
        }
    }
}

pub(super) async fn attempt<R: Respond>(
    streams: &Streams,
    x: &mut Exchange<'_, impl RecvBody, R>,
    ctx: &mut RequestCtx,
) -> Result<Relayed, Failure> {
    let router = ctx.router.clone().expect("a routed request");
    let timeouts = router.timeouts();
    let limits = ctx.limits;
    let connected = match upstream::kept(ctx) {
        Ok(kept) => kept,
        Err(new) => upstream::connect(&streams.connector, ctx, new).await?,
    };
    let Connected {
        stream: mut up,
        reused,
        key,
        ..
    } = connected;
    upstream_head(x, ctx);
    if let Err(e) = upstream::write_all(&mut up, &x.out, timeouts.read).await {
        if reused {
            return Err(Failure::Stale);
        }
        warn!("cluster {}: writing the request failed: {e}", router.name);
        return Err(Failure::Dropped("writing the request failed"));
    }
    if x.tunnel.is_none() && !x.upload.is_done() {
        x.upload
            .stream(&mut up, &limits, ctx.start, timeouts.read)
            .await?;
    }
    let head_request = x.parts.method == http::Method::HEAD;
    let mut filled = 0;
    loop {
        let server = (&mut x.buf, &mut x.head);
        let mut client = ResetWatch(x.respond);
        let read = upstream::read_head(
            &mut up,
            server,
            &mut filled,
            (reused, head_request),
            timeouts,
            &mut client,
        );
        let (len, framing, server_keeps) = match read.await {
            // Once the body streamed, nothing is sent again.
            Err(failure) if x.upload.streamed() => return Err(failure.unsendable()),
            r => r?,
        };
        let status = x.head.status;
        if let Some(key) = x.tunnel {
            let read = (len, filled);
            if let Some(done) = upgraded(streams, x, &mut up, key, read, &limits).await {
                return done;
            }
        } else if status == 101 {
            return Err(Failure::Upstream(
                502,
                "101 to a request that asked for no upgrade",
            ));
        }
        let streamed = x.upload.streamed();
        let method = x.parts.method.as_str().as_bytes();
        let may_retry = || !streamed && pipeline::idempotent(method);
        let heard = pipeline::heard(ctx, status, &ServerFields(&x.head, &x.buf), may_retry);
        if !Failure::after_head(heard, status)? {
            let _ = x
                .respond
                .send_informational(response(x.head.status, x.head.fields(&x.buf)));
            x.buf.copy_within(len..filled, 0);
            filled -= len;
            continue;
        }
        let mut reader = BodyReader::new(framing, (len, filled));
        let head_request = x.parts.method == http::Method::HEAD;
        let plan = ctx.compress.as_ref().and_then(|asked| {
            compress::plan(asked, head_request, status, &ServerFields(&x.head, &x.buf))
        });
        let mut encoder = plan.and_then(compress::Encoder::of);
        let mut head = response(status, x.head.fields(&x.buf));
        streams.alt_svc(R::VERSION, &mut head);
        if let Some(plan) = plan {
            compress::edit(head.headers_mut(), plan);
        }
        // A compressed body, empty or not, ends with the coding's trailer.
        let mut ended = reader.is_done() && encoder.is_none();
        let mut sending = match x.respond.send_response(head, ended) {
            Ok(s) => s,
            Err(_) => return Err(Failure::Client(499)),
        };
        while !ended {
            let data = match reader.next(&mut up, &mut x.buf, timeouts.read).await {
                Ok(Some(range)) => &x.buf[range],
                Ok(None) if encoder.is_some() => &[][..],
                Ok(None) => break,
                Err(why) => {
                    warn!("cluster {}: {why}", router.name);
                    sending.reset(Reset::Internal);
                    return Err(Failure::Client(status));
                }
            };
            let end = reader.is_done();
            let data = match &mut encoder {
                Some(e) => match e.push(data, end) {
                    Ok(squeezed) => squeezed,
                    Err(_) => {
                        warn!("cluster {}: compressing the answer failed", router.name);
                        sending.reset(Reset::Internal);
                        return Err(Failure::Client(status));
                    }
                },
                None => Bytes::copy_from_slice(data),
            };
            if send::data(&mut sending, data, end, &limits, &streams.name)
                .await
                .is_err()
            {
                return Err(Failure::Client(status));
            }
            if end {
                ended = true;
                break;
            }
        }
        if !ended {
            let _ = sending.send_data(Bytes::new(), true);
        }
        if reader.clean() && server_keeps && x.upload.is_done() {
            pool::put(key, up, streams.pool_size, timeouts.idle);
        }
        return Ok(Relayed {
            status,
            client_keep: true,
        });
    }
}

/// A tunnel's answer: after a `101` that accepts the key, `200` to the client and the
/// relay (`Some`); a `2xx` that did not upgrade is a failure (it would tell the client its
/// tunnel is open); any other answer goes to the client as it came (`None`).
async fn upgraded(
    streams: &Streams,
    x: &mut Exchange<'_, impl RecvBody, impl Respond>,
    up: &mut pingora_core::protocols::Stream,
    key: [u8; 24],
    (len, filled): (usize, usize),
    limits: &crate::config::ListenerLimits,
) -> Option<Result<Relayed, Failure>> {
    let status = x.head.status;
    if !(101..300).contains(&status) {
        return None;
    }
    let field = |name: &str| {
        x.head
            .fields(&x.buf)
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    };
    let websocket = field("upgrade").is_some_and(|u| u.eq_ignore_ascii_case(b"websocket"));
    if status != 101 || !websocket || !tunnel::accepts(&key, field("sec-websocket-accept")) {
        return Some(Err(Failure::Upstream(
            502,
            "the server did not accept the WebSocket's upgrade",
        )));
    }
    let fields = x.head.fields(&x.buf);
    let fields = fields.filter(|(n, _)| !n.eq_ignore_ascii_case(b"sec-websocket-accept"));
    let mut send = match x.respond.send_response(response(200, fields), false) {
        Ok(send) => send,
        Err(_) => return Some(Err(Failure::Client(499))),
    };
    let open = streams.tunnels.open();
    let limits = (limits, &*streams.name);
    let ended = tunnel::relay(up, &x.buf[len..filled], x.upload, &mut send, limits).await;
    // Counted as ended before it stops counting as open: the two never add up to less.
    log::debug!("a WebSocket over HTTP/2 ended: {}", ended.label());
    streams.tunnels.ended(ended);
    drop(open);
    Some(Ok(Relayed {
        status: 200,
        client_keep: true,
    }))
}

/// The client's stream while the server works: gone when the client resets it.
pub(super) struct ResetWatch<'a, R: Respond>(pub &'a mut R);

impl<R: Respond> Watch for ResetWatch<'_, R> {
    fn poll_gone(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.0.poll_reset(cx).map(|_| ())
    }
}

/// The stream's fields, as the edits read them; the host is the `:authority` when the
/// client sent no `Host`.
struct Fields<'a>(&'a Parts);

impl Source for Fields<'_> {
    fn first(&self, name: &str) -> Option<&[u8]> {
        match self.0.headers.get(name) {
            Some(v) => Some(v.as_bytes()),
            None if name == "host" => self.0.uri.authority().map(|a| a.as_str().as_bytes()),
            None => None,
        }
    }
}

/// The request head for the server, with tether's edits, and the body's first part, in
/// `out`.
fn upstream_head(x: &mut Exchange<'_, impl RecvBody, impl Respond>, ctx: &RequestCtx) {
    let parts = x.parts;
    let out = &mut x.out;
    out.clear();
    // A WebSocket's extended CONNECT is an HTTP/1.1 upgrade to the server (RFC 8441 §5).
    let method = match x.tunnel {
        Some(_) => "GET",
        None => parts.method.as_str(),
    };
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    let origin = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    out.extend_from_slice(origin.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let replaced = Replaced {
        forwarded: ctx.forwarded,
        ssl: ctx.ssl_headers.as_deref(),
        nominated: false,
        upgrade: false,
    };
    if !parts.headers.contains_key(http::header::HOST) {
        if let Some(authority) = parts.uri.authority() {
            line(out, b"Host", authority.as_str().as_bytes());
        }
    }
    let mut cookies = parts.headers.get_all(http::header::COOKIE).iter();
    if let Some(first) = cookies.next() {
        // HTTP/2 may split the cookies into fields of their own; HTTP/1.1 has one line
        // (RFC 9113 §8.2.3).
        out.extend_from_slice(b"Cookie: ");
        out.extend_from_slice(first.as_bytes());
        for cookie in cookies {
            out.extend_from_slice(b"; ");
            out.extend_from_slice(cookie.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    }
    for (name, value) in &parts.headers {
        let name = name.as_str().as_bytes();
        let ours = x.tunnel.is_some() && name == b"sec-websocket-key";
        if name != b"cookie" && !ours && !dropped(name, &replaced) {
            line(out, name, value.as_bytes());
        }
    }
    match &x.tunnel {
        Some(key) => {
            line(out, b"Connection", b"Upgrade");
            line(out, b"Upgrade", b"websocket");
            line(out, b"Sec-WebSocket-Key", key);
        }
        None => framing(out, x.upload.body()),
    }
    let secure = x.link.tls.clone().map(|digest| Secure { digest });
    let fields = Fields(parts);
    let mut up = Upstream::new(&fields, out);
    let link = (x.link.peer.map(|a| a.ip()), x.link.local, secure.as_ref());
    request_head::edit(&mut up, ctx, link, true);
    up.finish();
    if x.tunnel.is_none() {
        x.upload.first_part(&mut x.out);
    }
}

/// The client's head from the server's: its status and fields (over HTTP/1 or AJP), less
/// the hop fields that HTTP/2 has no place for and the `$WS*` fields.
pub(super) fn response<'a>(
    status: u16,
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> http::Response<()> {
    let mut response = http::Response::new(());
    *response.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::BAD_GATEWAY);
    let headers = response.headers_mut();
    for (name, value) in fields {
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        if is(b"connection")
            || is(b"keep-alive")
            || is(b"proxy-connection")
            || is(b"transfer-encoding")
            || is(b"upgrade")
            || is(b"te")
            || is(b"trailer")
            || (name.len() >= 3 && name[..3].eq_ignore_ascii_case(b"$ws"))
        {
            continue;
        }
        // A field the `http` crate does not take (a server's broken name or value) is
        // left out, as pingora-proxy's parser leaves it.
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name),
            http::HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    response
}
