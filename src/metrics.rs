//! Prometheus metrics (DESIGN section 6): `tether_*` names in base units, `_total` counters,
//! labels with bounded values only (cluster, server, outcome, status class, result).
//!
//! Metric families are registered once in Prometheus' default registry, which
//! `pingora-prometheus` serves. Per-request counters are resolved to handles when a
//! routing snapshot is built ([`ClusterMetrics`]), so the request path never formats a
//! label. Gauges that mirror live state (health, state, weight, in flight, partition
//! table) are read at scrape time by `live_metrics::LiveCollector`.

mod cluster;
mod heap;
mod process;
mod queue;

pub use heap::register as register_heap;

pub use cluster::ClusterMetrics;

use once_cell::sync::Lazy;
use pingora_prometheus::prometheus::{
    self, register_gauge, register_histogram_vec, register_int_counter, register_int_counter_vec,
    register_int_gauge_vec, Gauge, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
};

/// Request and connect latency buckets: 0.5 ms to 10 s.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

pub(crate) static REQUESTS: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_requests_total",
        "Requests answered, by cluster, server (none when tether answered itself) and status class.",
        &["cluster", "server", "status_class"]
    )
    .expect("register tether_requests_total")
});

pub(crate) static SERVER_FAILED: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_server_failed_requests_total",
        "Requests the server failed, which tether answered for it (jkstatus's errors): \
         `timeout`, no answer in read_timeout (504; jkstatus's reply timeouts), or `error`.",
        &["cluster", "server", "reason"]
    )
    .expect("register tether_server_failed_requests_total")
});

pub(crate) static REQUEST_DURATION: Lazy<HistogramVec> = Lazy::new(|| {
    register_histogram_vec!(
        "tether_request_duration_seconds",
        "Time from the request's arrival to the end of its response.",
        &["cluster"],
        BUCKETS.to_vec()
    )
    .expect("register tether_request_duration_seconds")
});

pub(crate) static CONNECT_DURATION: Lazy<HistogramVec> = Lazy::new(|| {
    register_histogram_vec!(
        "tether_upstream_connect_duration_seconds",
        "Time to open a new upstream connection (reused connections are not counted).",
        &["cluster"],
        BUCKETS.to_vec()
    )
    .expect("register tether_upstream_connect_duration_seconds")
});

pub(crate) static CONNECT_FAILURES: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_upstream_connect_failures_total",
        "Upstream connect failures and timeouts.",
        &["cluster", "server"]
    )
    .expect("register tether_upstream_connect_failures_total")
});

pub(crate) static RETRIES: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_retries_total",
        "Requests sent again to another (or the same) server after a failure.",
        &["cluster"]
    )
    .expect("register tether_retries_total")
});

pub(crate) static DECISIONS: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_routing_decisions_total",
        "Routing decisions by outcome: route_hit, domain_hit, partition_hit, hash_fallback, new_session, failover, rejected.",
        &["cluster", "outcome"]
    )
    .expect("register tether_routing_decisions_total")
});

pub(crate) static WSFO: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_wsfo_tagged_total",
        "Requests sent to a WebSphere server with $WSFO (failover).",
        &["cluster"]
    )
    .expect("register tether_wsfo_tagged_total")
});

static RELOADS: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_config_reloads_total",
        "Config reloads by result (success, failure).",
        &["result"]
    )
    .expect("register tether_config_reloads_total")
});

static LAST_RELOAD: Lazy<Gauge> = Lazy::new(|| {
    register_gauge!(
        "tether_config_last_reload_success_timestamp_seconds",
        "Unix time of the last config load or reload that succeeded."
    )
    .expect("register tether_config_last_reload_success_timestamp_seconds")
});

static BUILD_INFO: Lazy<IntGaugeVec> = Lazy::new(|| {
    register_int_gauge_vec!(
        "tether_build_info",
        "Always 1; labels say which tether runs.",
        &["version"]
    )
    .expect("register tether_build_info")
});

static TLS_HANDSHAKES: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_tls_handshakes_total",
        "TLS handshakes of client connections, by listener and result (ok, timeout, version, \
         cipher, client_certificate, plain_http, eof, other).",
        &["listener", "result"]
    )
    .expect("register tether_tls_handshakes_total")
});

/// Counts a TLS handshake (once per connection, not per request).
pub fn tls_handshake(listener: &str, result: &str) {
    TLS_HANDSHAKES.with_label_values(&[listener, result]).inc();
}

static CERT_EXPIRY: Lazy<IntGaugeVec> = Lazy::new(|| {
    register_int_gauge_vec!(
        "tether_tls_certificate_expiry_timestamp_seconds",
        "When each certificate a listener serves expires (Unix time).",
        &["listener", "certificate"]
    )
    .expect("register tether_tls_certificate_expiry_timestamp_seconds")
});

/// Sets the expiry of a listener's certificates (at start and each reload).
pub fn certificate_expiry(listener: &str, certs: &[(String, i64)]) {
    for (name, at) in certs {
        CERT_EXPIRY.with_label_values(&[listener, name]).set(*at);
    }
}

/// Forgets every certificate's expiry (before a reload sets the new ones).
pub fn certificate_expiry_reset() {
    CERT_EXPIRY.reset();
}

static HTTP3_PACKETS: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_http3_packets_sent_total",
        "Packets an HTTP/3 listener sent without a connection, by kind: `retry` (the client's \
         address to be proved first, under load) or `stateless_reset` (to a connection it \
         does not know).",
        &["listener", "kind"]
    )
    .expect("register tether_http3_packets_sent_total")
});

/// An HTTP/3 listener's counters of packets sent without a connection: (Retry, reset).
pub fn http3_packets(listener: &str) -> (IntCounter, IntCounter) {
    (
        HTTP3_PACKETS.with_label_values(&[listener, "retry"]),
        HTTP3_PACKETS.with_label_values(&[listener, "stateless_reset"]),
    )
}

static REQUESTS_BY_VERSION: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_http_requests_total",
        "Requests received, by listener and HTTP version (1.0, 1.1, 2, 3).",
        &["listener", "version"]
    )
    .expect("register tether_http_requests_total")
});

/// A listener's per-version request counters, resolved once (no label look-up per request).
pub struct VersionCounters {
    pub http10: IntCounter,
    pub http11: IntCounter,
    pub http2: IntCounter,
    pub http3: IntCounter,
}

impl VersionCounters {
    pub fn new(listener: &str) -> Self {
        let c = |v: &str| REQUESTS_BY_VERSION.with_label_values(&[listener, v]);
        VersionCounters {
            http10: c("1.0"),
            http11: c("1.1"),
            http2: c("2"),
            http3: c("3"),
        }
    }

    pub fn count(&self, version: http::Version) {
        match version {
            http::Version::HTTP_2 => self.http2.inc(),
            http::Version::HTTP_3 => self.http3.inc(),
            http::Version::HTTP_10 | http::Version::HTTP_09 => self.http10.inc(),
            _ => self.http11.inc(),
        }
    }
}

static ENGINE_REQUESTS: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_engine_requests_total",
        "HTTP/1 requests on listeners on tether's engine (`http1: engine`, the default), by listener and by who served them: \
         `engine` (tether's HTTP/1 engine) or `handover` (handed to Pingora's proxy).",
        &["listener", "path"]
    )
    .expect("register tether_engine_requests_total")
});

/// An engine listener's counters of requests served by the engine and handed over.
pub fn engine_counters(listener: &str) -> (IntCounter, IntCounter) {
    (
        ENGINE_REQUESTS.with_label_values(&[listener, "engine"]),
        ENGINE_REQUESTS.with_label_values(&[listener, "handover"]),
    )
}

static ENGINE_PARKED: Lazy<IntGaugeVec> = Lazy::new(|| {
    register_int_gauge_vec!(
        "tether_engine_parked_connections",
        "Idle keep-alive connections of a plain-TCP engine listener parked until their next request \
         (no task, no buffers: about a hundred bytes each), by listener.",
        &["listener"]
    )
    .expect("register tether_engine_parked_connections")
});

/// An engine listener's count of parked connections.
pub fn engine_parked(listener: &str) -> IntGauge {
    ENGINE_PARKED.with_label_values(&[listener])
}

static UPGRADED_OPEN: Lazy<IntGaugeVec> = Lazy::new(|| {
    register_int_gauge_vec!(
        "tether_upgraded_connections",
        "Upgraded connections (WebSockets after their 101) open on tether's engine, by listener.",
        &["listener"]
    )
    .expect("register tether_upgraded_connections")
});

static UPGRADED_ENDED: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_upgraded_connections_total",
        "Upgraded connections on tether's engine (WebSockets over HTTP/1 and HTTP/2) that ended, by listener and how: `closed` (both \
         sides ended), `client_failed`, `server_failed` (a reset; the other side was closed), \
         `idle_timeout` (tunnel_idle_timeout).",
        &["listener", "ended"]
    )
    .expect("register tether_upgraded_connections_total")
});

/// How a tunnel ended (`tether_upgraded_connections_total{ended}`): a WebSocket
/// after its `101` on HTTP/1, or its extended CONNECT on HTTP/2 (`Tunnels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelEnded {
    /// Both sides ended their halves.
    Closed,
    /// The client failed (a reset, an error); the server's side was closed.
    ClientFailed,
    /// The server failed; the client's side was closed.
    ServerFailed,
    /// No byte moved for `tunnel_idle_timeout`.
    Idle,
}

impl TunnelEnded {
    pub fn label(self) -> &'static str {
        match self {
            TunnelEnded::Closed => "closed",
            TunnelEnded::ClientFailed => "client_failed",
            TunnelEnded::ServerFailed => "server_failed",
            TunnelEnded::Idle => "idle_timeout",
        }
    }
}

/// A listener's upgraded connections: how many are open, and how they ended.
pub struct Tunnels {
    listener: String,
    open: IntGauge,
}

/// One open upgraded connection, counted while it lives.
pub struct OpenTunnel<'a>(&'a IntGauge);

impl Drop for OpenTunnel<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Tunnels {
    pub fn new(listener: &str) -> Self {
        Tunnels {
            listener: listener.into(),
            open: UPGRADED_OPEN.with_label_values(&[listener]),
        }
    }

    pub fn open(&self) -> OpenTunnel<'_> {
        self.open.inc();
        OpenTunnel(&self.open)
    }

    /// Counts an upgraded connection that ended.
    pub fn ended(&self, how: TunnelEnded) {
        UPGRADED_ENDED
            .with_label_values(&[&*self.listener, how.label()])
            .inc();
    }
}

static ROUTE_REQUESTS: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_route_requests_total",
        "Requests that matched each host/path route, by listener and route name.",
        &["listener", "route"]
    )
    .expect("register tether_route_requests_total")
});

/// A route's request counter (resolved when the snapshot is built).
pub fn route_counter(listener: &str, route: &str) -> IntCounter {
    ROUTE_REQUESTS.with_label_values(&[listener, route])
}

static CLIENT_CLOSED: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_client_closed_total",
        "Client connections or requests tether cut short, by listener and reason \
         (max_connections, request_head_timeout, request_head_too_large, request_body_timeout, \
         send_timeout, proxy_protocol_from, proxy_protocol_malformed, proxy_protocol_missing, \
         http2_rapid_reset).",
        &["listener", "reason"]
    )
    .expect("register tether_client_closed_total")
});

/// Counts a client connection or request cut short by a listener limit (rare: not on the
/// path of normal requests).
pub fn client_closed(listener: &str, reason: &str) {
    CLIENT_CLOSED.with_label_values(&[listener, reason]).inc();
}

static CLIENT_LIMIT_REFUSALS: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_client_limit_refusals_total",
        "Connections closed and requests answered 429 because one client went over its \
         listener's client_limits, by listener and limit (connections, requests).",
        &["listener", "limit"]
    )
    .expect("register tether_client_limit_refusals_total")
});

/// The refusal counter of one listener's client limit (resolved when the limits are built).
pub fn client_limit_refusals(listener: &str, limit: &str) -> IntCounter {
    CLIENT_LIMIT_REFUSALS.with_label_values(&[listener, limit])
}

pub(crate) static ACCESS_LOG_DROPPED: Lazy<IntCounter> = Lazy::new(|| {
    register_int_counter!(
        "tether_access_log_dropped_total",
        "Access log lines dropped because the writer fell behind."
    )
    .expect("register tether_access_log_dropped_total")
});

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Registers what exists from the start and the collector of live state.
pub fn init(collector: impl prometheus::core::Collector + 'static) {
    BUILD_INFO
        .with_label_values(&[env!("CARGO_PKG_VERSION")])
        .set(1);
    for result in ["success", "failure"] {
        RELOADS.with_label_values(&[result]);
    }
    Lazy::force(&ACCESS_LOG_DROPPED);
    Lazy::force(&CLIENT_CLOSED);
    // Prometheus's standard process_* metrics, of this process also after `-d` forks.
    process::register();
    LAST_RELOAD.set(unix_now());
    if let Err(e) = prometheus::register(Box::new(collector)) {
        log::warn!("cannot register the live-state metrics: {e}");
    }
}

/// Counts a reload; a success also sets the time of the last good one.
pub fn reload_done(ok: bool) {
    RELOADS
        .with_label_values(&[if ok { "success" } else { "failure" }])
        .inc();
    if ok {
        LAST_RELOAD.set(unix_now());
    }
}
