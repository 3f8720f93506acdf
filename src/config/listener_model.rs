//! Validated listener settings: addresses, routes, TLS, and what one client may hold or
//! send. Re-exported by `model`, where the rest of the validated configuration is.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tether_plugins::PluginSpec;

/// A listening address and the cluster its requests go to.
#[derive(Debug, Clone, PartialEq)]
pub struct Listener {
    pub name: String,
    pub address: SocketAddr,
    /// Index into [`Config::clusters`]: the default cluster (requests no route matches).
    /// Without one (only when routes are given), such requests get 404.
    pub cluster: Option<usize>,
    /// Host and path routes, in the file's order (`routes:`).
    pub routes: Vec<Route>,
    /// Which of several matching routes wins (`route_order:`).
    pub route_order: RouteOrder,
    /// Pages for tether's own answers (`error_pages:`), under the route's and cluster's.
    pub error_pages: Option<super::ErrorPages>,
    /// Files for the requests no route takes and no default cluster does, and for those an
    /// exclusion turns away (`serve:`), as the web server in front of mod_jk served them;
    /// `None`: those get 404.
    pub serve: Option<std::sync::Arc<super::Files>>,
    /// The servers' answers compressed for clients that take it (`compress:`); `None`: off.
    pub compress: Option<std::sync::Arc<super::Compress>>,
    /// Set `X-Forwarded-For`, `-Proto` and `-Host` on requests to the servers.
    pub forwarded_headers: bool,
    /// Proxies in front of this listener (a CDN, a load balancer) whose `X-Forwarded-For`
    /// is believed: the client is the right-most address in it that is not one of them
    /// (nginx `set_real_ip_from` with `real_ip_recursive on`). Empty (the default): the
    /// client is the connection's peer.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// Connections start with a PROXY protocol header (v1 or v2) from these balancers
    /// (`proxy_protocol.from`); its address is the client's. `None` (the default): no
    /// header is read.
    pub proxy_protocol: Option<Vec<ipnet::IpNet>>,
    /// Routing plugins, in order; they may send a request to another cluster.
    pub plugins: Vec<PluginSpec>,
    /// What one client may hold or send (`limits:`).
    pub limits: ListenerLimits,
    /// Open connections and requests per client address (`client_limits:`); `None` (the
    /// default): no per-client counting.
    pub client_limits: Option<ClientLimits>,
    /// TLS termination; plain HTTP when absent.
    pub tls: Option<ListenerTls>,
    /// Accept HTTP/2 with prior knowledge (h2c) on a plain listener (default false).
    pub h2c: bool,
    /// Which code serves HTTP/1 requests (`http1:`, fixed at start).
    pub http1: Http1Path,
    /// Which code serves HTTP/2 streams (`http2:`, fixed at start).
    pub http2: Http2Path,
    /// Serve HTTP/3 over QUIC on the UDP port of the same address (TLS listeners only;
    /// default false, fixed at start).
    pub http3: bool,
    /// With `http3`: how long clients may remember, from the `Alt-Svc` field of its
    /// HTTP/1.1 and HTTP/2 answers, that the listener serves HTTP/3 (zero: not said).
    pub alt_svc_max_age: std::time::Duration,
    /// With `http3`: from how many connections a new client must prove its address first
    /// (a Retry, RFC 9000 §8.1); 0: every one.
    pub http3_retry_above: u64,
    /// Answer every request with a redirect to https (then `cluster` is not needed).
    pub redirect_https: Option<Redirect>,
}

/// Which code serves a listener's HTTP/1 requests (`listeners[].http1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Http1Path {
    /// tether's own HTTP/1 engine, the default (`docs/DESIGN.md` section 10); what it does
    /// not take is handed to Pingora's proxy.
    #[default]
    Engine,
    /// Pingora's proxy (`pingora-proxy`) for every request.
    Proxy,
}

/// Which code serves a listener's HTTP/2 streams (`listeners[].http2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Http2Path {
    /// tether's own HTTP/2 front end (`crate::front::http2`), the default; a listener whose
    /// plugins change messages has its HTTP/2 connections served by Pingora's proxy.
    #[default]
    Engine,
    /// Pingora's proxy (`pingora-proxy`) for every HTTP/2 stream.
    Proxy,
}

/// Which of several routes that match a request wins; then the more specific host, then
/// the file's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RouteOrder {
    /// An exact path before any wildcard; then more literal characters (`specific`).
    #[default]
    Specific,
    /// mod_jk's: more `/` in the pattern, then the longer pattern, exact or not (`mod_jk`).
    ModJk,
}

/// One host/path route of a listener (`listeners[].routes[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// For the access log and metrics (default `<listener>#<index>`).
    pub name: String,
    /// `None`: any host. Exact (`www.example.com`), `*.example.com` or `*`, lower-case,
    /// with an optional port (`*:443`).
    pub host: Option<String>,
    /// Exact, or with mod_jk's `*` and `?` wildcards.
    pub path: String,
    pub action: RouteAction,
    /// mod_jk `JkUnMount` / uriworkermap `!`: requests the best route would send to this
    /// route's cluster get 404 instead.
    pub exclude: bool,
    /// uriworkermap `-`: kept in the file, not used.
    pub disabled: bool,
    /// Routing plugins for the requests of this route (after the listener's).
    pub plugins: Vec<PluginSpec>,
    /// The listener's `limits.max_request_body` for this route's requests.
    pub max_request_body: Option<u64>,
    /// Pages for tether's own answers to this route's requests, over the cluster's and
    /// the listener's.
    pub error_pages: Option<super::ErrorPages>,
    /// The listener's `compress` for this route's requests (`types: []` turns it off).
    pub compress: Option<std::sync::Arc<super::Compress>>,
}

/// What a route does with a request.
#[derive(Debug, Clone, PartialEq)]
pub enum RouteAction {
    /// Send it to this cluster (index into [`Config::clusters`]).
    Cluster(usize),
    /// Answer it with this status and body.
    Respond { status: u16, body: String },
    /// Answer it with a redirect.
    Redirect { to: String, status: u16 },
    /// Answer it with a file from a directory.
    Serve(std::sync::Arc<super::Files>),
}

/// A listener's `tls:` section.
#[derive(Debug, Clone, PartialEq)]
pub struct ListenerTls {
    /// Certificate chain (leaf first) and key, PEM: served when SNI is missing or unknown.
    pub cert: PathBuf,
    pub key: PathBuf,
    /// More certificates, chosen by SNI (exact names or `*.example.com`).
    pub sni: Vec<SniCert>,
    /// ALPN protocols offered, in order (default `h2`, `http/1.1`).
    pub alpn: Vec<String>,
    /// Oldest TLS version accepted (default 1.2).
    pub min_version: TlsVersion,
    /// OpenSSL cipher list for TLS 1.2; Mozilla's "intermediate" list when absent.
    pub ciphers: Option<String>,
    /// Client certificates (mTLS).
    pub client_auth: Option<ClientAuth>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SniCert {
    pub names: Vec<String>,
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    V1_2,
    V1_3,
}

/// Client certificates verified against `ca`; `required` refuses a client without one.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientAuth {
    pub ca: PathBuf,
    pub required: bool,
}

/// `redirect_https`: every request answered with `status` to `https://host[:port]/path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redirect {
    /// The https port (default 443, left out of the URL).
    pub port: u16,
    /// 301, 302, 307 or 308 (default 308: the method and body are kept).
    pub status: u16,
}

/// What one client may hold or send on a listener (`listeners[].limits`), so that a few
/// clients cannot take the proxy or the application servers down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerLimits {
    /// Largest request head (request line and headers) in bytes; a larger one gets 431.
    /// Default 32 KiB (nginx: 4 x 8 KiB, HAProxy: 16 KiB).
    pub max_request_head: usize,
    /// Deadline for a whole request head, from the connection's start or, on a keep-alive
    /// connection, from the end of the previous request plus `keepalive_timeout`; the
    /// connection is closed when it passes (HAProxy `timeout http-request`). Default 10s.
    pub request_head_timeout: Duration,
    /// How long an idle keep-alive connection waits for the next request. Default 60s.
    pub keepalive_timeout: Duration,
    /// Most open client connections; more are closed at once. Default 10000.
    pub max_connections: usize,
    /// Request bodies up to this many bytes are read whole before a server is connected
    /// (nginx `proxy_request_buffering`); of larger and chunked ones, this many bytes are
    /// (at most 60 KiB on HTTP/1, 48 KiB on HTTP/2), and the rest streams. 0 turns it off.
    /// Default and most 64 KiB (Pingora's retry buffer).
    pub request_buffer: usize,
    /// Largest request body in bytes (Apache `LimitRequestBody`, nginx
    /// `client_max_body_size`, the plug-in's `PostSizeLimit`): one that says it is larger
    /// gets 413 before a server is chosen; one that grows past it while it streams is cut
    /// off with 413. 0: no bound (the default). A route's `max_request_body` overrides it.
    pub max_request_body: u64,
    /// Deadline for reading a buffered body (408 when it passes), and for each read of a
    /// streamed one. Default 30s.
    pub request_body_timeout: Duration,
    /// Deadline for each write to the client (a slow reader is closed). Default 60s.
    pub send_timeout: Duration,
    /// A request body must arrive at this many bytes a second or more, on average, after
    /// `request_body_grace` (Apache `mod_reqtimeout` MinRate; Kestrel
    /// `MinRequestBodyDataRate`): else 408 and the upstream request is abandoned. Default
    /// 500; 0 turns it off.
    pub request_body_min_rate: u32,
    /// How long a body may wait for its client before `request_body_min_rate` applies:
    /// once reads waited `t` for the client, `(t - grace) * rate` bytes must have arrived.
    /// Default 10s.
    pub request_body_grace: Duration,
    /// A client must read a response at this many bytes a second or more: each write of
    /// `n` bytes gets `max(send_grace, n / rate)`, at most `send_timeout` (Kestrel
    /// `MinResponseDataRate`). A write that does not finish closes the connection with a
    /// reset. Default 240; 0: `send_timeout` alone.
    pub send_min_rate: u32,
    /// The shortest time a write gets under `send_min_rate`. Default 5s.
    pub send_grace: Duration,
    /// An upgraded connection (a WebSocket after its `101`) that moves no byte in either
    /// direction for this long is closed (HAProxy `timeout tunnel`). Default 1h.
    pub tunnel_idle_timeout: Duration,
}

/// Per-client limits of a listener (`listeners[].client_limits`): nginx `limit_conn` and
/// `limit_req`, HAProxy's `conn_cur` and `http_req_rate`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientLimits {
    /// Most open connections of one client; more are closed at once. `None`: no limit.
    pub connections: Option<u32>,
    /// Most requests of one client per `per` (a sliding window); more are answered 429
    /// with `Retry-After`. `None`: no limit.
    pub requests: Option<u32>,
    /// The window of `requests`. Default 1s.
    pub per: Duration,
    /// How many distinct clients (after grouping by prefix) one window of `requests` is
    /// sized for: 32 bytes each, rounded up to a power of two. More than that still works,
    /// counting a little high (DESIGN section 9). Default 100,000 (4 MiB).
    pub clients: u32,
    /// Clients never limited (monitoring, office networks, a partner's gateway).
    pub allow: Vec<ipnet::IpNet>,
    /// IPv4 clients are counted by this prefix. Default 32 (each address).
    pub ipv4_prefix: u8,
    /// IPv6 clients are counted by this prefix, so that one host cannot rotate through the
    /// addresses of its network. Default 64.
    pub ipv6_prefix: u8,
}

/// The largest `client_limits.connections`.
pub const MAX_CLIENT_CONNECTIONS: u32 = 1_000_000;
/// The largest `client_limits.requests` (per window; the counters hold a little more).
pub const MAX_CLIENT_REQUESTS: u32 = 1_000_000;
/// The most clients `client_limits.clients` may size a window for (320 MiB).
pub const MAX_CLIENT_TABLE: u32 = 10_000_000;

/// The largest `max_request_body` a config may give (1 TiB).
pub const MAX_REQUEST_BODY: u64 = 1 << 40;

/// The largest `request_buffer` (Pingora keeps at most this much of a body for a retry).
pub const MAX_REQUEST_BUFFER: usize = 65_536;

impl Default for ListenerLimits {
    fn default() -> Self {
        ListenerLimits {
            max_request_head: 32 * 1024,
            request_head_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            request_buffer: MAX_REQUEST_BUFFER,
            max_request_body: 0,
            request_body_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(60),
            request_body_min_rate: 500,
            request_body_grace: Duration::from_secs(10),
            send_min_rate: 240,
            send_grace: Duration::from_secs(5),
            tunnel_idle_timeout: Duration::from_secs(3600),
        }
    }
}
