//! A stream's side of a try over AJP/1.3 (the try itself is
//! `upstream::ajp::exchange`'s): the request as `FORWARD_REQUEST` (`protocol` `HTTP/2.0` or `HTTP/3.0`;
//! the host from `:authority`), the body's first part and then the rest from the stream as
//! the server asks for it, and the answer as a head and data within the client's window.

use super::exchange::{response, Exchange, ResetWatch};
use super::io::{RecvBody, Reset, Respond, SendBody};
use super::{send, Streams};
use crate::config::{Ajp, ListenerLimits};
use crate::pipeline::compress::Plan;
use crate::pipeline::upstream;
use crate::pipeline::write_on_stack;
use crate::pipeline::{self, Failure, Relayed, RequestCtx, Stop};
use crate::wire::ajp;
use bytes::Bytes;

/// Fields that AJP carries otherwise or that are of the client's hop.
const HOP: [&str; 6] = [
    "connection",
    "te",
    "trailer",
    "upgrade",
    "transfer-encoding",
    "expect",
];

pub(super) async fn attempt(
    streams: &Streams,
    x: &mut Exchange<'_, impl RecvBody, impl Respond>,
    ctx: &mut RequestCtx,
    settings: &Ajp,
) -> Result<Relayed, Failure> {
    // The server's packets are read into the exchange's buffer, lent for the try.
    let mut buf = std::mem::take(&mut x.buf);
    let head_request = x.parts.method == http::Method::HEAD;
    let mut side = Side {
        x,
        streams,
        limits: ctx.limits,
        head_request,
        sending: None,
        ended: false,
    };
    let connector = &streams.connector;
    let relayed = upstream::ajp::exchange(&mut side, &mut buf, connector, ctx, settings).await;
    side.x.buf = buf;
    relayed
}

/// The stream's side of a try over AJP: the request from the stream's head and body, the
/// answer as a head and data within the client's window.
struct Side<'a, 'x, B: RecvBody, R: Respond> {
    x: &'a mut Exchange<'x, B, R>,
    streams: &'a Streams,
    limits: ListenerLimits,
    head_request: bool,
    /// The stream's sending half, once the head went.
    sending: Option<R::Body>,
    ended: bool,
}

impl<B: RecvBody, R: Respond> upstream::ajp::ClientSide for Side<'_, '_, B, R> {
    fn forward(&mut self, ctx: &RequestCtx, settings: &Ajp) -> Result<(), ajp::TooLarge> {
        // The body's length for Tomcat, when it is known.
        let whole = self.x.upload.is_done().then_some(self.first_len());
        forward(self.x, ctx, settings, whole)
    }

    fn first_len(&self) -> usize {
        self.x.upload.first().len()
    }

    fn first_packet(&mut self, range: std::ops::Range<usize>, max: usize) {
        let _ = ajp::body_packet(&mut self.x.out, &self.x.upload.first()[range], max);
    }

    fn out(&mut self) -> &mut Vec<u8> {
        &mut self.x.out
    }

    fn body_done(&self) -> bool {
        self.x.upload.is_done()
    }

    fn streamed(&self) -> bool {
        self.x.upload.streamed()
    }

    fn idempotent(&self) -> bool {
        pipeline::idempotent(self.x.parts.method.as_str().as_bytes())
    }

    async fn more(&mut self, want: usize, ctx: &RequestCtx) -> Result<(), Stop> {
        let x = &mut *self.x;
        x.upload
            .more(want, &self.limits, ctx.start, &mut x.out)
            .await
    }

    fn watch(&mut self) -> impl upstream::Watch + '_ {
        match &mut self.sending {
            Some(sending) => Watched::Sending(sending),
            None => Watched::Head(ResetWatch(self.x.respond)),
        }
    }

    async fn head(
        &mut self,
        status: u16,
        fields: ajp::ResponseHeaders<'_>,
        _length: Option<u64>,
        plan: Option<Plan>,
    ) -> Result<bool, ()> {
        let no_body = self.head_request || status == 204 || status == 304;
        let mut head = response(status, fields);
        self.streams.alt_svc(R::VERSION, &mut head);
        if let Some(plan) = plan {
            crate::pipeline::compress::edit(head.headers_mut(), plan);
        }
        let sending = self
            .x
            .respond
            .send_response(head, no_body)
            .map_err(|_| ())?;
        self.sending = Some(sending);
        self.ended = no_body;
        Ok(!no_body)
    }

    async fn flush(&mut self) -> Result<(), ()> {
        Ok(())
    }

    async fn data(&mut self, data: &[u8]) -> Result<(), ()> {
        let Some(sending) = self.sending.as_mut() else {
            return Err(());
        };
        let data = Bytes::copy_from_slice(data);
        send::data(sending, data, false, &self.limits, &self.streams.name)
            .await
            .map_err(|_| ())
    }

    async fn end(&mut self) -> Result<(), ()> {
        match (&mut self.sending, self.ended) {
            (_, true) => Ok(()),
            (Some(sending), false) => sending.send_data(Bytes::new(), true).map_err(|_| ()),
            (None, false) => Err(()),
        }
    }

    fn started(&self) -> bool {
        self.sending.is_some()
    }

    fn abort(&mut self) {
        if let Some(sending) = self.sending.as_mut() {
            sending.reset(Reset::Internal);
        }
    }

    fn client_keep(&self) -> bool {
        true
    }

    fn pool_size(&self) -> usize {
        self.streams.pool_size
    }
}

/// The stream while the server works: before its head went, its reset; after, its
/// sending half's.
enum Watched<'a, R: Respond> {
    Head(ResetWatch<'a, R>),
    Sending(&'a mut R::Body),
}

impl<R: Respond> upstream::Watch for Watched<'_, R> {
    fn poll_gone(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        match self {
            Watched::Head(w) => w.poll_gone(cx),
            Watched::Sending(s) => s.poll_reset(cx).map(|_| ()),
        }
    }
}

/// The request as `FORWARD_REQUEST`, in `x.out` (cleared); `length`: the body's, when it
/// was read whole.
fn forward<R: Respond>(
    x: &mut Exchange<'_, impl RecvBody, R>,
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
        protocol: match R::VERSION {
            http::Version::HTTP_3 => b"HTTP/3.0",
            _ => b"HTTP/2.0",
        },
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
