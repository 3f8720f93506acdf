//! An experiment: how cheap can an HTTP/1.1 → HTTP/1.1 proxy be on Pingora's
//! public API *below* `pingora-proxy`? This is the lean path's upper bound: it does what
//! `bare_pingora` does (round robin over the upstreams, optionally `X-Forwarded-*` and
//! tether's upstream timeouts) with its own connection loop on `pingora-core`'s HTTP/1
//! server session, connector and connection pool, and nothing else: no phases, no retry
//! buffer, no modules, no error pages. If this does not save 20% of user CPU per request
//! against `bare_pingora`, a full lean path in tether (which must keep every behaviour)
//! cannot either. `bench/results/HISTORY.md` ("Where the instructions go, and a lean
//! HTTP/1 loop") has the figures.
//!
//! ```sh
//! cargo build --release --example lean_h1
//! target/release/examples/lean_h1 --listen 127.0.0.1:8080 --threads 1 \
//!     --work-stealing false --upstream 127.0.0.1:8081
//! ```

use async_trait::async_trait;
use pingora_core::apps::ServerApp;
use pingora_core::connectors::http::v1::Connector;
use pingora_core::protocols::http::v1::server::HttpSession as DownSession;
use pingora_core::protocols::Stream;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::listening::Service;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_core::Result;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

#[path = "common/args.rs"]
mod args;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

struct Lean {
    connector: Connector,
    peers: Vec<HttpPeer>,
    next: AtomicUsize,
    forwarded: bool,
    idle: Option<Duration>,
}

impl Lean {
    /// Proxies the request `down` has read; false when the connection must close.
    async fn proxy(&self, down: &mut DownSession) -> Result<bool> {
        let peer = &self.peers[self.next.fetch_add(1, Relaxed) % self.peers.len()];
        let mut req = Box::new(down.req_header().clone());
        if self.forwarded {
            if let Some(client) = down.client_addr().and_then(|a| a.as_inet()) {
                req.insert_header("X-Forwarded-For", client.ip().to_string())?;
            }
            req.insert_header("X-Forwarded-Proto", "http")?;
            if let Some(host) = req.headers.get(http::header::HOST).cloned() {
                req.insert_header("X-Forwarded-Host", host)?;
            }
        }
        let (mut up, _reused) = self.connector.get_http_session(peer).await?;
        up.write_request_header(req).await?;
        while let Some(chunk) = down.read_body_bytes().await? {
            up.write_body(&chunk).await?;
        }
        up.finish_body().await?;
        up.read_response().await?;
        let resp = match up.resp_header() {
            Some(r) => Box::new(r.clone()),
            None => return Ok(false),
        };
        down.write_response_header(resp).await?;
        while let Some(chunk) = up.read_body_bytes().await? {
            down.write_body(&chunk).await?;
        }
        down.finish_body().await?;
        self.connector
            .release_http_session(up, peer, self.idle)
            .await;
        Ok(true)
    }
}

/// Answers errors the simplest way: the connection closes.
async fn serve(lean: &Lean, mut stream: Stream) -> Option<Stream> {
    loop {
        let mut down = DownSession::new(stream);
        match down.read_request().await {
            Ok(Some(_)) => {}
            _ => return None,
        }
        if !matches!(lean.proxy(&mut down).await, Ok(true)) {
            return None;
        }
        let (next, prefix) = down.reuse().await.ok()??.into_parts();
        if prefix.is_some() {
            return None; // pipelining: not in this experiment
        }
        stream = next;
    }
}

#[async_trait]
impl ServerApp for Lean {
    async fn process_new(self: &Arc<Self>, stream: Stream, _: &ShutdownWatch) -> Option<Stream> {
        serve(self, stream).await
    }
}

fn main() {
    env_logger::init();
    let args = args::parse_args();
    let mut server = args::server(&args);
    let peers = args
        .upstreams
        .iter()
        .map(|a| {
            let mut peer = HttpPeer::new(a.as_str(), false, String::new());
            if args.timeouts {
                peer.options.connection_timeout = Some(Duration::from_secs(3));
                peer.options.read_timeout = Some(Duration::from_secs(60));
                peer.options.idle_timeout = Some(Duration::from_secs(60));
            }
            peer
        })
        .collect();
    let lean = Lean {
        connector: Connector::new(None),
        peers,
        next: AtomicUsize::new(0),
        forwarded: args.forwarded,
        idle: args.timeouts.then_some(Duration::from_secs(60)),
    };
    let mut service = Service::new("lean h1".to_string(), lean);
    service.add_tcp(&args.listen);
    server.add_service(service);
    server.run_forever();
}
