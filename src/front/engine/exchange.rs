//! One try of a request on tether's engine: a server connection (the one the client's
//! connection kept, or a new one from Pingora's connector), the head and buffered body in
//! one write, the server's head read and edited in place, and its body relayed as it comes.

use super::answer;
use super::conn::{to_client, write_all, Conn};
use super::relay::{relay, RelayError};
use super::squeeze;
use super::tunnel;
use super::upload::Upload;
use super::wire;
use crate::config::ListenerLimits;
use crate::pipeline::compress::{self, Plan};
use crate::pipeline::upstream::request_head::{self, Replaced};
use crate::pipeline::upstream::{self, pool};
use crate::pipeline::Secure;
use crate::pipeline::{self, Failure, Relayed, RequestCtx};
use crate::routing::Timeouts;
use crate::wire::http1::framing::Body;
use crate::wire::http1::response::Framing;
use log::warn;
use pingora_core::connectors::TransportConnector;
use pingora_core::protocols::Stream;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::ReadBuf;

/// What the request is, for the try.
pub struct Request {
    /// Its body: the part read, and the rest while it streams.
    pub upload: Upload,
    pub head_request: bool,
    /// The client's connection may carry another request after this one (once its body
    /// was read: [`Request::keeps`]).
    pub client_keep: bool,
    /// The client speaks HTTP/1.0 (a chunked answer is relayed without its coding).
    pub http10: bool,
    /// Its `Connection` nominates fields (left out of the upstream head).
    pub nominates: bool,
    /// It asks for an upgrade (a WebSocket's handshake): a `101` turns the connection into
    /// a tunnel (`tunnel.rs`).
    pub upgrade: bool,
    pub limits: ListenerLimits,
    /// The listener's `Alt-Svc` field (it serves HTTP/3), for the answer's head.
    pub alt_svc: Option<http::HeaderValue>,
    /// Most idle connections kept per server and thread (`upstream_keepalive_pool_size`).
    pub pool_size: usize,
}

impl Request {
    /// May the client's connection carry another request after the answer? Not while
    /// the body is unread (it would be taken for the next request).
    pub fn keeps(&self) -> bool {
        self.client_keep && self.upload.is_done()
    }
}

pub async fn attempt(
    connector: &TransportConnector,
    (listener, tunnels): (&str, &crate::metrics::Tunnels),
    c: &mut Conn,
    ctx: &mut RequestCtx,
    req: &mut Request,
) -> Result<Relayed, Failure> {
    let router = ctx.router.clone().expect("a routed request");
    let server = ctx.server.expect("a routed request");
    let slot = &router.servers()[server];
    let timeouts = router.timeouts();
    let connected = match upstream::kept(ctx) {
        Ok(kept) => kept,
        Err(new) => upstream::connect(connector, ctx, new).await?,
    };
    let (mut up, reused, key) = (connected.stream, connected.reused, connected.key);
    upstream_head(c, ctx, req);
    if let Err(e) = write_all(&mut up, &c.out, timeouts.read).await {
        // Nothing past the first part was read yet: it may go again.
        return Err(match reused {
            true => Failure::Stale,
            false => {
                warn!(
                    "cluster {} server {}: writing the request failed: {e}",
                    router.name, slot.config.name
                );
                Failure::Dropped("writing the request failed")
            }
        });
    }
    let mut filled = 0;
    loop {
        // The rest of a large or chunked body, until it is all sent or the server speaks.
        if !req.upload.is_done() {
            let since = ctx.start;
            let rate = (&req.limits, timeouts.read);
            let sent = req.upload.stream(c, &mut up, &mut filled, rate, since);
            sent.await.map_err(Failure::Body)?;
        }
        let (len, framing, server_keeps) =
            match read_head(&mut up, c, &mut filled, reused, timeouts, req).await {
                // Once the body streamed, nothing is sent again.
                Err(failure) if req.upload.streamed() => return Err(failure.unsendable()),
                r => r?,
            };
        let status = c.up_head.status;
        if status == 101 && !req.upgrade {
            return Err(Failure::Upstream(
                502,
                "101 to a request that asked for no upgrade",
            ));
        }
        let may_retry =
            || req.upload.body != Body::Chunked && !req.upload.streamed() && idempotent(c);
        let heard = pipeline::heard(
            ctx,
            status,
            &upstream::ServerFields(&c.up_head, &c.up_buf),
            may_retry,
        );
        if !Failure::after_head(heard, status)? {
            client_head(c, Framing::None, true, (req.http10, None), None);
            if to_client(&mut c.stream, &c.out, &req.limits, listener)
                .await
                .is_err()
            {
                return Err(Failure::Client(0));
            }
            c.up_buf.copy_within(len..filled, 0);
            filled -= len;
            continue;
        }
        // A `101` is framed as having no body, and the connection is the tunnel's after it.
        let upgraded = status == 101;
        let plan = ctx.compress.as_ref().and_then(|asked| {
            let fields = upstream::ServerFields(&c.up_head, &c.up_buf);
            compress::plan(asked, req.head_request, status, &fields)
        });
        let encoder = plan.and_then(compress::Encoder::of);
        // A compressed answer to an HTTP/1.0 client ends with its connection.
        let unframed = encoder.is_some() && req.http10;
        let client_keep = !upgraded && req.keeps() && framing != Framing::Close && !unframed;
        let dechunk = req.http10 && framing == Framing::Chunked;
        let alt_svc = req.alt_svc.as_ref();
        client_head(
            c,
            framing,
            client_keep && !dechunk,
            (req.http10, alt_svc),
            plan,
        );
        if upgraded {
            if to_client(&mut c.stream, &c.out, &req.limits, listener)
                .await
                .is_err()
            {
                return Err(Failure::Client(101));
            }
            // Boxed: the tunnel's state is not carried in every request's future.
            Box::pin(tunnel(&mut up, c, (len, filled), req, tunnels)).await;
            return Ok(Relayed {
                status,
                client_keep: false,
            });
        }
        let relayed = match encoder {
            // Boxed: an answer sent as it came does not carry the compressing relay.
            Some(encoder) => {
                let to = (&req.limits, listener);
                let read = (len, filled);
                let squeezed = squeeze::relay(&mut up, c, framing, encoder, read, timeouts, to);
                Box::pin(squeezed).await
            }
            None => {
                let to = (&req.limits, listener);
                relay(&mut up, c, framing, dechunk, (len, filled), timeouts, to).await
            }
        };
        return match relayed {
            Ok(clean) => {
                if clean && server_keeps && req.upload.is_done() {
                    pool::put(key, up, req.pool_size, timeouts.idle);
                }
                Ok(Relayed {
                    status,
                    client_keep: client_keep && !dechunk,
                })
            }
            Err(RelayError::Client) => Err(Failure::Client(status)),
            Err(RelayError::Server(why)) => {
                warn!("cluster {} server {}: {why}", router.name, slot.config.name);
                Err(Failure::Client(status))
            }
        };
    }
}

/// Smallest buffer each way of an upgraded connection (its head's 4 KiB would take four
/// reads and writes for each of a WebSocket's 16 KiB frames).
const TUNNEL_BUFFER: usize = 16 * 1024;

/// The upgraded connection, relayed until it ends: what came after the client's head and
/// after the server's (`up_buf[start..filled]`) goes first.
async fn tunnel(
    up: &mut Stream,
    c: &mut Conn,
    (start, filled): (usize, usize),
    req: &Request,
    tunnels: &crate::metrics::Tunnels,
) {
    let Conn {
        stream,
        buf,
        end,
        head,
        up_buf,
        ..
    } = c;
    for b in [&mut *buf, &mut *up_buf] {
        if b.len() < TUNNEL_BUFFER {
            b.resize(TUNNEL_BUFFER, 0);
        }
    }
    let to_server = tunnel::Half::new(buf, head.len, *end);
    let to_client = tunnel::Half::new(up_buf, start, filled);
    let open = tunnels.open();
    let ended = tunnel::run(
        stream,
        up,
        to_server,
        to_client,
        req.limits.tunnel_idle_timeout,
    )
    .await;
    // Counted as ended before it stops counting as open: the two never add up to less.
    log::debug!("an upgraded connection ended: {}", ended.label());
    tunnels.ended(ended);
    drop(open);
    // Nothing of the buffer is a next request.
    *end = 0;
}

/// May the request be sent again (RFC 9110 §9.2.2)?
pub(super) fn idempotent(c: &Conn) -> bool {
    pipeline::idempotent(c.head.method.of(&c.buf))
}

/// The request head for the server, with tether's edits, and the buffered body, in `out`.
fn upstream_head(c: &mut Conn, ctx: &RequestCtx, req: &Request) {
    let replaced = Replaced {
        forwarded: ctx.forwarded,
        ssl: ctx.ssl_headers.as_deref(),
        nominated: req.nominates,
        upgrade: req.upgrade,
    };
    let secure = c.tls().map(|digest| Secure { digest });
    let client = wire::Client {
        head: &c.head,
        buf: &c.buf,
    };
    let mut up = wire::start(&client, req.upload.body, &replaced, &mut c.out);
    let link = (c.peer.map(|a| a.ip()), c.local, secure.as_ref());
    request_head::edit(&mut up, ctx, link, false);
    up.finish();
    req.upload.first_part(&c.buf, &mut c.out);
}

/// Reads the server's head (`upstream::read_head`) while the client's connection is
/// watched: bytes it sends meanwhile (a pipelined request) are kept after the current
/// one, while the read buffer has room.
async fn read_head(
    up: &mut Stream,
    c: &mut Conn,
    filled: &mut usize,
    reused: bool,
    timeouts: Timeouts,
    req: &Request,
) -> Result<(usize, Framing, bool), Failure> {
    let Conn {
        stream,
        buf,
        end,
        up_buf,
        up_head,
        ..
    } = c;
    let mut client = Watched { stream, buf, end };
    let server = (up_buf, up_head);
    upstream::read_head(
        up,
        server,
        filled,
        (reused, req.head_request),
        timeouts,
        &mut client,
    )
    .await
}

/// The client's connection while the server works.
pub(super) struct Watched<'a> {
    pub stream: &'a mut Stream,
    pub buf: &'a mut [u8],
    pub end: &'a mut usize,
}

impl upstream::Watch for Watched<'_> {
    #[inline]
    fn poll_gone(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            // With no room left, what it sends waits in the kernel, unread.
            if *self.end >= self.buf.len() {
                return Poll::Pending;
            }
            let mut read = ReadBuf::new(&mut self.buf[*self.end..]);
            match Pin::new(&mut **self.stream).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) if !read.filled().is_empty() => {
                    *self.end += read.filled().len()
                }
                Poll::Ready(_) => return Poll::Ready(()),
            }
        }
    }
}

/// The client's head, from the server's: the status line and fields, less the server's
/// hop fields and `$WS*` fields, with the client connection's persistence.
/// `alt_svc`: the listener's `Alt-Svc`, for a final answer.
fn client_head(
    c: &mut Conn,
    framing: Framing,
    keep: bool,
    (http10, alt_svc): (bool, Option<&http::HeaderValue>),
    plan: Option<Plan>,
) {
    let status = c.up_head.status;
    answer::status_line(&mut c.out, status);
    let dechunk = http10 && framing == Framing::Chunked;
    for (name, value) in c.up_head.fields(&c.up_buf) {
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        if is(b"connection") || is(b"keep-alive") || is(b"proxy-connection") {
            continue;
        }
        if dechunk && is(b"transfer-encoding") {
            continue;
        }
        if name.len() >= 3 && name[..3].eq_ignore_ascii_case(b"$ws") {
            continue;
        }
        answer::server_field(&mut c.out, name, value, plan);
    }
    answer::plan_fields(&mut c.out, plan);
    if let Some(alt_svc) = alt_svc {
        answer::field(&mut c.out, b"Alt-Svc", alt_svc.as_bytes());
    }
    if matches!(plan, Some(Plan::Squeeze(..))) && !http10 {
        answer::field(&mut c.out, b"Transfer-Encoding", b"chunked");
    }
    if status == 101 {
        answer::field(&mut c.out, b"Connection", b"Upgrade");
    } else if (100..200).contains(&status) {
    } else if !keep {
        answer::field(&mut c.out, b"Connection", b"close");
    } else if http10 {
        answer::field(&mut c.out, b"Connection", b"keep-alive");
    }
    c.out.extend_from_slice(b"\r\n");
}
