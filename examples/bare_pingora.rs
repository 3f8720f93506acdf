//! The floor for a Pingora-based proxy: Pingora's own minimal load balancer, built from
//! the same Pingora version as tether. It round-robins every request over the backends
//! with `pingora_load_balancing::LoadBalancer<RoundRobin>` (no stickiness, no health
//! checks, no header rewriting), so `bench/run` can show what tether costs on top of it.
//! It is built like tether: same release profile, same allocator (jemalloc).
//!
//! ```sh
//! cargo build --release --example bare_pingora
//! target/release/examples/bare_pingora --listen 127.0.0.1:8080 --threads 2 \
//!     --upstream 127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8083
//! ```
//!
//! Each flag may also be given by environment: `BARE_LISTEN`, `BARE_THREADS`,
//! `BARE_UPSTREAMS` (comma-separated). `--work-stealing false` runs Pingora's threads as
//! separate event loops, as tether does by default, so `bench/run` compares like for like.
//! `--forwarded` adds `X-Forwarded-For`, `-Proto` and `-Host` the plain Pingora way, as
//! tether does: the floor for an edge proxy whose application servers need them.
//! `--timeouts` sets tether's default upstream timeouts on each peer (connect 3 s, read
//! 60 s, idle 60 s), as any production proxy has (nginx: `proxy_read_timeout 60s`,
//! upstream `keepalive_timeout 60s`); Pingora arms a timer for each timed read and for
//! each connection parked in its pool.

use async_trait::async_trait;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_core::Result;
use pingora_http::RequestHeader;
use pingora_load_balancing::{selection::RoundRobin, LoadBalancer};
use pingora_proxy::{ProxyHttp, Session};
use std::sync::Arc;
use std::time::Duration;

// The same allocator as tether, so the benchmark's floor differs from tether only in what
// tether does per request.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

pub struct Lb {
    upstreams: Arc<LoadBalancer<RoundRobin>>,
    forwarded: bool,
    timeouts: bool,
}

#[async_trait]
impl ProxyHttp for Lb {
    type CTX = ();
    fn new_ctx(&self) -> Self::CTX {}

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        // The key does not matter for round robin.
        let upstream = self.upstreams.select(b"", 256).ok_or_else(|| {
            pingora_error::Error::explain(pingora_error::ErrorType::ConnectNoRoute, "no upstream")
        })?;
        let mut peer = HttpPeer::new(upstream, false, String::new());
        if self.timeouts {
            // tether's defaults (`connect_timeout`, `read_timeout`, `idle_timeout`).
            peer.options.connection_timeout = Some(Duration::from_secs(3));
            peer.options.read_timeout = Some(Duration::from_secs(60));
            peer.options.idle_timeout = Some(Duration::from_secs(60));
        }
        Ok(Box::new(peer))
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        request: &mut RequestHeader,
        _ctx: &mut (),
    ) -> Result<()> {
        if self.forwarded {
            if let Some(client) = session.client_addr().and_then(|a| a.as_inet()) {
                request.insert_header("X-Forwarded-For", client.ip().to_string())?;
            }
            request.insert_header("X-Forwarded-Proto", "http")?;
            if let Some(host) = request.headers.get(http::header::HOST).cloned() {
                request.insert_header("X-Forwarded-Host", host)?;
            }
        }
        Ok(())
    }
}

#[path = "common/args.rs"]
mod args;
use args::parse_args;

fn main() {
    env_logger::init();
    let args = parse_args();
    let mut server = args::server(&args);

    let upstreams = LoadBalancer::try_from_iter(args.upstreams.iter().map(String::as_str))
        .expect("upstream addresses");
    let lb = Lb {
        upstreams: Arc::new(upstreams),
        forwarded: args.forwarded,
        timeouts: args.timeouts,
    };
    let mut lb = pingora_proxy::http_proxy_service(&server.configuration, lb);
    lb.add_tcp(&args.listen);
    server.add_service(lb);
    server.run_forever();
}
