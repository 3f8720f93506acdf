//! A connection to the server of a request's current try: one this thread kept for that
//! server (`pool.rs`), or a new one, whose connect time is counted.

use super::pool;
use crate::pipeline::{Failure, RequestCtx};
use pingora_core::connectors::TransportConnector;
use pingora_core::protocols::Stream;
use pingora_core::upstreams::peer::{HttpPeer, Peer};
use tokio::io::AsyncWriteExt;

/// A connection to the try's server.
pub struct Connected {
    pub stream: Stream,
    /// It was kept from an earlier request (the server may have closed it meanwhile).
    pub reused: bool,
    /// The server's key in the pool, to give the connection back under.
    pub key: u64,
    /// How long a kept connection waited in the pool (zero for a new one).
    pub idle: std::time::Duration,
}

/// A connection this thread kept for `ctx.server`, or, when there is none, the server's
/// peer to connect to and its key ([`connect`]). Not an `async fn`: a kept connection,
/// the common case, costs no future of its own (and the peer, large, is boxed only for a
/// new connection, which allocates anyway).
pub fn kept(ctx: &RequestCtx) -> Result<Connected, Box<(HttpPeer, u64)>> {
    let router = ctx.router.as_ref().expect("a routed request");
    let server = ctx.server.expect("a routed request");
    let timeouts = router.timeouts();
    let peer = crate::pipeline::http_peer(ctx, &router.servers()[server], timeouts);
    let key = peer.reuse_hash();
    // The try's start (read just before it) stands for now.
    let now = ctx
        .connect_start
        .unwrap_or_else(crate::base::poll_time::now);
    match pool::take(key, timeouts.idle, now) {
        Some((stream, idle)) => Ok(Connected {
            stream,
            reused: true,
            key,
            idle,
        }),
        None => Err(Box::new((peer, key))),
    }
}

/// A new connection to `peer` (the key `kept` gave), its connect time counted.
pub async fn connect(
    connector: &TransportConnector,
    ctx: &RequestCtx,
    new: Box<(HttpPeer, u64)>,
) -> Result<Connected, Failure> {
    let (peer, key) = *new;
    let stream = match connector.new_stream(&peer).await {
        Ok(s) => s,
        Err(e) => {
            let why = crate::pipeline::why_failed(&e, &peer);
            return Err(match e.etype() {
                pingora_error::ErrorType::ConnectTimedout => Failure::ConnectTimedOut(why),
                _ => Failure::Connect(why),
            });
        }
    };
    // Counted for the server's byte totals, for as long as the connection lives (kept in
    // the pool, it stays the same server's).
    let stream = match (&ctx.router, ctx.server) {
        (Some(router), Some(i)) => {
            super::counted::Counted::wrap(stream, router.servers()[i].live.bytes().clone())
        }
        _ => stream,
    };
    if let (Some(start), Some(m)) = (ctx.connect_start, &ctx.metrics) {
        m.connected(start.elapsed().as_secs_f64());
    }
    Ok(Connected {
        stream,
        reused: false,
        key,
        idle: std::time::Duration::ZERO,
    })
}

/// Writes `bytes` to `stream` within `timeout`, and flushes.
pub async fn write_all(
    stream: &mut Stream,
    bytes: &[u8],
    timeout: std::time::Duration,
) -> std::io::Result<()> {
    let write = async {
        stream.write_all(bytes).await?;
        stream.flush().await
    };
    match crate::base::poll_time::timeout(timeout, write).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the peer did not read in time",
        )),
    }
}
