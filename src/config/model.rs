//! Validated configuration: parsed addresses, enums, resolved references, defaults applied.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
pub use tether_plugins::PluginSpec;

/// Most servers a request may be tried on (`max_attempts` upper bound).
pub const MAX_ATTEMPTS_LIMIT: u32 = 16;
/// Largest `grace_period_seconds` and `graceful_shutdown_timeout_seconds` (one hour).
pub const MAX_SHUTDOWN_SECONDS: u64 = 3600;
/// Largest `weight` a server may have.
pub const MAX_WEIGHT: u32 = 1000;
/// Default and largest `websphere.partition_table_max`.
pub const DEFAULT_PARTITION_TABLE_MAX: usize = 100_000;
pub const PARTITION_TABLE_MAX_LIMIT: usize = 10_000_000;
/// Default `session_timeout` (Tomcat's default session timeout).
pub const DEFAULT_SESSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);
/// Default and largest `session_table_max` (live sessions counted exactly per cluster).
pub const DEFAULT_SESSION_TABLE_MAX: usize = 1_000_000;
pub const SESSION_TABLE_MAX_LIMIT: usize = 100_000_000;

/// A whole, valid tether configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Things that work but are probably not what was meant (overlapping or unreachable
    /// routes): `tether -t` prints them, start and reload log them.
    pub warnings: Vec<super::ConfigError>,
    pub server: ServerSettings,
    /// Where partition tables and runtime states are kept across restarts.
    pub state_dir: Option<PathBuf>,
    pub listeners: Vec<Listener>,
    pub clusters: Vec<Cluster>,
    /// The admin API; off when absent.
    pub admin: Option<Admin>,
    /// Address of the Prometheus `/metrics` listener; off when absent.
    pub metrics: Option<SocketAddr>,
    /// The access log; off when absent.
    pub access_log: Option<AccessLogSettings>,
    /// Reload when the config file changes, looking this often; off when absent.
    pub watch_config: Option<Duration>,
    /// The Redis a fleet of tethers shares state through; off when absent.
    pub shared_state: Option<super::shared_state::SharedState>,
}

/// The access log (`access_log:`).
#[derive(Debug, Clone, PartialEq)]
pub struct AccessLogSettings {
    /// File the log is appended to (reopened on `SIGUSR1`).
    pub path: PathBuf,
    /// Replace session ids in logged paths (`;jsessionid=` and the session cookie's name
    /// as a query parameter) with `***`, keeping the route (default true: a session id in
    /// a log is a credential).
    pub mask_session_ids: bool,
}

/// The admin API listener.
#[derive(Debug, Clone, PartialEq)]
pub struct Admin {
    pub address: SocketAddr,
    /// Bearer token every call must carry, read from `token_file` at load time: the
    /// `admin` role's.
    pub token: Option<String>,
    /// More tokens (`tokens:`), each with its role, read at load time.
    pub role_tokens: Vec<(String, Role)>,
    /// Allow an admin API without a token on a non-loopback address (default false: such a
    /// config is refused, since anyone who reaches the address could stop every server).
    pub allow_unauthenticated: bool,
}

/// What an admin API token may do; each role may do what the ones before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Status, sessions, explain.
    Read,
    /// And drain, stop, activate, weight.
    Operate,
    /// And reload and dropping run-time changes: everything.
    Admin,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Operate => "operate",
            Role::Admin => "admin",
        }
    }
}

/// How a health check talks to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthCheckKind {
    /// A TCP connect.
    Tcp,
    /// An HTTP GET whose status must be in `expect`.
    Http,
}

/// Active health checks of a cluster (JServ watchdog, HAProxy `check`).
#[derive(Debug, Clone, PartialEq)]
pub struct HealthCheck {
    pub kind: HealthCheckKind,
    pub path: String,
    /// `Host` header of the check; the server's address when absent.
    pub host: Option<String>,
    /// Accepted statuses, inclusive.
    pub expect: (u16, u16),
    pub interval: Duration,
    pub timeout: Duration,
    /// Consecutive passes that bring a down server up.
    pub rise: u32,
    /// Consecutive failures that take an up server down.
    pub fall: u32,
}

/// Pingora's server settings, from the `server:` section.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSettings {
    pub threads: usize,
    /// Off by default: one event loop per thread, as nginx and HAProxy run, measured at 2
    /// threads with 12–25% lower p99 and less CPU per request than Pingora's stealing
    /// scheduler (bench/README.md, "What was tried").
    pub work_stealing: bool,
    pub grace_period_seconds: u64,
    pub graceful_shutdown_timeout_seconds: u64,
    pub pid_file: String,
    pub upgrade_sock: String,
    pub error_log: Option<String>,
    pub daemon: bool,
    pub user: Option<String>,
    pub group: Option<String>,
    pub upstream_keepalive_pool_size: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            threads: 2,
            work_stealing: false,
            grace_period_seconds: 5,
            graceful_shutdown_timeout_seconds: 5,
            pid_file: "/tmp/tether.pid".to_string(),
            upgrade_sock: "/tmp/tether_upgrade.sock".to_string(),
            error_log: None,
            daemon: false,
            user: None,
            group: None,
            upstream_keepalive_pool_size: 128,
        }
    }
}

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

/// A cluster's TLS to its servers (`clusters[].tls`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterTls {
    /// CA bundle the servers' certificates are verified with (the system's when absent).
    pub ca: Option<PathBuf>,
    /// SNI name, also the name the certificate must carry (the server's host when absent).
    pub sni: Option<String>,
    /// Verify the servers' certificates (default true; false is logged at start).
    pub verify: bool,
    /// The proxy's own certificate and key, for servers that ask for one.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// Tomcat `SSLValve` headers (`clusters[].ssl_headers`): the names the facts go under.
#[derive(Debug, Clone, PartialEq)]
pub struct SslHeaders {
    pub client_cert: String,
    pub cipher: String,
    pub session_id: String,
    pub key_size: String,
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
            request_body_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(60),
            request_body_min_rate: 500,
            request_body_grace: Duration::from_secs(10),
            send_min_rate: 240,
            send_grace: Duration::from_secs(5),
        }
    }
}

/// How session ids carry the server's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionStyle {
    /// Tomcat / JServ: `<id>.<jvmRoute>`.
    Tomcat,
    /// WebSphere: `<cache id><id>:<clone or partition>[:<clone>...]`.
    Websphere,
}

/// `clusters[].outlier`: a server whose answers are 5xx `consecutive_5xx` times in a row
/// takes no new sessions for `ejection` (longer each time it happens again, up to ten
/// times as long); its own sessions still reach it, and if they keep failing it is marked
/// down. Never more than `max_ejected_percent` of the servers are ejected at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outlier {
    pub consecutive_5xx: u32,
    /// Failures to answer in a row (a reset or a timeout after connecting: tether's own
    /// 502/504 for the server) that eject it likewise.
    pub consecutive_errors: u32,
    pub ejection: Duration,
    pub max_ejected_percent: u32,
}

/// How new sessions are spread over servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Smooth weighted round robin (nginx, JServ balance sets).
    Weighted,
    /// Fewest requests in flight relative to weight.
    LeastInflight,
    /// Fewest live sessions relative to weight (two servers drawn at random, the emptier
    /// taken; ties by requests in flight).
    Sessions,
}

/// Administrative state of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerState {
    /// Takes new and sticky requests.
    Active,
    /// Takes only requests of its own sessions (mod_jk *disabled*, HAProxy *drain*).
    Draining,
    /// Takes no requests (mod_jk *stopped*).
    Stopped,
}

impl ServerState {
    /// As the config, the admin API and the metrics write it.
    pub fn name(self) -> &'static str {
        match self {
            ServerState::Active => "active",
            ServerState::Draining => "draining",
            ServerState::Stopped => "stopped",
        }
    }
}

/// A set of servers sharing sessions.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    pub name: String,
    pub session_style: SessionStyle,
    pub session_cookie: String,
    pub session_path: String,
    /// Optional request header carrying the session id (non-browser clients).
    pub session_header: Option<String>,
    pub sticky: bool,
    pub sticky_force: bool,
    pub max_attempts: u32,
    pub balance: Balance,
    pub recover_after: Duration,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub idle_timeout: Duration,
    /// Separator of the clone list in WebSphere session ids (`:`, or `+` with CloneSeparatorChange).
    pub clone_separator: u8,
    /// WebSphere: set the plug-in's `$WSRA`, `$WSRH`, `$WSSC`, `$WSSN`, `$WSSP`, `$WSIS`.
    pub private_headers: bool,
    /// WebSphere: most partitions the partition table holds.
    pub partition_table_max: usize,
    /// A session is live until this long after its last request (issue 26).
    pub session_timeout: Duration,
    /// The most live sessions counted exactly (0: not counted).
    pub session_table_max: usize,
    /// A request whose session names a draining server where it is not live is balanced
    /// as a new session (when the session table knows every live session).
    pub drain_rescue: bool,
    /// A server that comes back gets a share of new sessions that ramps from 10 % to its
    /// weight over this long (zero: at once).
    pub slow_start: Duration,
    /// Ejection from new sessions of a server that keeps answering 5xx (`outlier`).
    pub outlier: Option<Outlier>,
    pub health_check: Option<HealthCheck>,
    /// Upstream statuses that count as a failure for idempotent requests: the next server
    /// is tried (mod_jk `fail_on_status`, nginx `proxy_next_upstream http_503`).
    pub fail_on_status: Vec<u16>,
    /// Routing plugins run after the listener's, for requests of this cluster.
    pub plugins: Vec<PluginSpec>,
    /// TLS to the servers; plain HTTP when absent.
    pub tls: Option<ClusterTls>,
    /// TLS facts for Tomcat's `SSLValve`, when set.
    pub ssl_headers: Option<SslHeaders>,
    pub servers: Vec<Server>,
}

/// One backend application server.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    pub name: String,
    pub address: SocketAddr,
    /// Tomcat `jvmRoute`; defaults to the name.
    pub route: String,
    /// WebSphere CloneID.
    pub clone_id: Option<String>,
    pub weight: u32,
    pub domain: Option<String>,
    /// Index of the failover server in the same cluster.
    pub redirect: Option<usize>,
    pub backup: bool,
    pub state: ServerState,
    /// The host name of `address` as written, when it was a name (not an IP): the SNI and
    /// verified name of TLS to this server unless the cluster's `tls.sni` says otherwise.
    pub host: Option<String>,
}
