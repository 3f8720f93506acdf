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
use pingora_core::server::configuration::{Opt, ServerConf};
use pingora_core::server::Server;
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

struct Args {
    listen: String,
    threads: usize,
    work_stealing: bool,
    forwarded: bool,
    timeouts: bool,
    upstreams: Vec<String>,
}

fn usage() -> ! {
    eprintln!(
        "usage: bare_pingora [--listen ADDR] [--threads N] [--work-stealing true|false] [--forwarded]\n\
         \x20                   [--timeouts]\n\
         \x20                   [--upstream ADDR,ADDR,...]\n\
         (or BARE_LISTEN, BARE_THREADS, BARE_WORK_STEALING, BARE_FORWARDED=1, BARE_TIMEOUTS=1,\n\
         \x20BARE_UPSTREAMS)"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let env = |k: &str| std::env::var(k).ok();
    let mut listen = env("BARE_LISTEN").unwrap_or_else(|| "127.0.0.1:6188".into());
    let mut threads: usize = env("BARE_THREADS")
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    let mut work_stealing: bool = env("BARE_WORK_STEALING")
        .and_then(|t| t.parse().ok())
        .unwrap_or(true);
    let flag = |k: &str| env(k).is_some_and(|v| v == "1" || v == "true");
    let mut forwarded = flag("BARE_FORWARDED");
    let mut timeouts = flag("BARE_TIMEOUTS");
    let mut upstreams = env("BARE_UPSTREAMS").unwrap_or_default();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--listen" => listen = val(),
            "--threads" => threads = val().parse().unwrap_or_else(|_| usage()),
            "--work-stealing" => work_stealing = val().parse().unwrap_or_else(|_| usage()),
            "--forwarded" => forwarded = true,
            "--timeouts" => timeouts = true,
            "--upstream" | "--upstreams" => upstreams = val(),
            _ => usage(),
        }
    }
    let upstreams: Vec<String> = upstreams
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    if upstreams.is_empty() || threads == 0 {
        usage();
    }
    Args {
        listen,
        threads,
        work_stealing,
        forwarded,
        timeouts,
        upstreams,
    }
}

fn main() {
    env_logger::init();
    let args = parse_args();
    let conf = ServerConf {
        threads: args.threads,
        work_stealing: args.work_stealing,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(0),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(Opt::default(), conf);
    server.bootstrap();

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
