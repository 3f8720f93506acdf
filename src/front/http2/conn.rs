//! One HTTP/2 connection on tether's front end, in one task: its streams are accepted and
//! served side by side in that task (their server connections come from this thread's
//! pool), a stop sends GOAWAY and lets the streams in flight end, a connection idle for the
//! listener's `keepalive_timeout` is closed, and one whose client resets most of the
//! streams it opens (rapid reset) is ended.

use super::settings;
use super::Http2;
use crate::front::streams::{Link, Served};
use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use log::debug;
use pingora_core::protocols::Stream;
use pingora_core::server::ShutdownWatch;
use std::time::Duration;

/// How long a connection that was told to go away (GOAWAY) may take to end when no stream
/// is left: a client that does not read the GOAWAY does not keep it.
const GOAWAY_DRAIN: Duration = Duration::from_secs(5);

impl Http2 {
    /// Serves the connection (its client preface not read yet) until it ends.
    pub async fn serve(&self, stream: Stream, link: Link, mut shutdown: ShutdownWatch) {
        let limits = self.streams.limits();
        let name = self.streams.name();
        let handshake = settings::builder(&limits).handshake::<_, Bytes>(stream);
        let mut conn =
            match crate::base::poll_time::timeout(limits.request_head_timeout, handshake).await {
                Ok(Ok(conn)) => conn,
                Ok(Err(e)) => return debug!("listener {name}: HTTP/2 handshake: {e}"),
                Err(_) => return debug!("listener {name}: HTTP/2 handshake timed out"),
            };
        let mut streams = FuturesUnordered::new();
        let (mut opened, mut reset) = (0u64, 0u64);
        let mut closing = false;
        let idle = tokio::time::sleep(limits.keepalive_timeout);
        tokio::pin!(idle);
        loop {
            if *shutdown.borrow() && !closing {
                conn.graceful_shutdown();
                closing = true;
            }
            tokio::select! {
                biased;
                _ = shutdown.changed(), if !closing => {
                    conn.graceful_shutdown();
                    closing = true;
                }
                Some(served) = streams.next(), if !streams.is_empty() => {
                    if served == Served::ResetByClient {
                        reset += 1;
                    }
                    if reset > settings::SERVED_RESETS && 2 * reset > opened {
                        crate::metrics::client_closed(name, "http2_rapid_reset");
                        conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                        closing = true;
                    }
                    if streams.is_empty() {
                        let wait = if closing { GOAWAY_DRAIN } else { limits.keepalive_timeout };
                        idle.as_mut().reset(tokio::time::Instant::now() + wait);
                    }
                }
                accepted = conn.accept() => match accepted {
                    Some(Ok((request, respond))) => {
                        opened += 1;
                        // Boxed: the set keeps a node the size of its future for its
                        // own life (its stub) and for as long as any waker of a finished
                        // stream is held (the h2 crate keeps some); a stream's future is
                        // several KiB, a box's pointer is not, and an idle connection
                        // should hold neither.
                        let (parts, recv) = request.into_parts();
                        streams.push(Box::pin(self.streams.stream(parts, recv, respond, &link)));
                    }
                    Some(Err(e)) => {
                        debug!("listener {name}: HTTP/2 connection: {e}");
                        break;
                    }
                    None => break,
                },
                () = &mut idle, if streams.is_empty() => {
                    if closing {
                        break;
                    }
                    conn.graceful_shutdown();
                    closing = true;
                    idle.as_mut().reset(tokio::time::Instant::now() + GOAWAY_DRAIN);
                }
            }
        }
    }
}
