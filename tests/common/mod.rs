//! Test harness: simulated Tomcat servers and a real `tether` process on loopback.
#![allow(dead_code)]

pub mod curl;
pub mod daemon;
pub mod fleet;
pub mod h2frames;
pub mod h3;
pub mod import;
pub mod lookup;
pub mod markdown;
pub mod pki;
pub mod prometheus;
pub mod real_tomcat;
pub mod recording;
pub mod redis;
pub mod script;
pub mod servers;
pub mod webdriver;
pub mod websocket;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tether::cli::sim::{HttpClient, TomcatSim};

/// A running tether process; killed when dropped.
pub struct Tether {
    pub addr: SocketAddr,
    /// The admin API, when started with `Opts::admin`.
    pub admin: Option<SocketAddr>,
    /// The metrics listener, when started with `Opts::metrics`.
    pub metrics: Option<SocketAddr>,
    pub dir: PathBuf,
    child: Child,
    /// The directory was given by the test (state to reuse); do not delete it.
    keep_dir: bool,
}

/// A unique scratch directory for one test.
pub fn scratch_dir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tether-test-{}-{tag}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A loopback port held for a server that binds it later, and for as long as the holder
/// lives (across a server's restarts on it). The socket is bound with `SO_REUSEADDR` and
/// never listens: connections to the port are refused while the server is down, no other
/// socket (an outgoing connection's automatic port included) can take it, and a server
/// that sets `SO_REUSEADDR` too (Redis does) binds and listens on it beside this one.
#[derive(Debug)]
pub struct ReservedPort {
    fd: std::os::fd::OwnedFd,
    pub port: u16,
}

impl ReservedPort {
    pub fn new() -> ReservedPort {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        // SAFETY: plain socket calls on a descriptor this function owns; every result is
        // checked before it is used.
        unsafe {
            let raw = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(raw >= 0, "socket: {}", std::io::Error::last_os_error());
            let fd = OwnedFd::from_raw_fd(raw);
            let one: libc::c_int = 1;
            let r = libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
            assert_eq!(r, 0, "SO_REUSEADDR: {}", std::io::Error::last_os_error());
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let r = libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_in).cast(),
                len,
            );
            assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
            let mut len = len;
            let r = libc::getsockname(
                fd.as_raw_fd(),
                (&mut addr as *mut libc::sockaddr_in).cast(),
                &mut len,
            );
            assert_eq!(r, 0, "getsockname: {}", std::io::Error::last_os_error());
            ReservedPort {
                port: u16::from_be(addr.sin_port),
                fd,
            }
        }
    }
}

impl Default for ReservedPort {
    fn default() -> Self {
        ReservedPort::new()
    }
}

/// A port for a server a test starts (tether, Tomcat, openssl): reserved until the test
/// binary exits ([`ReservedPort`]: bound with `SO_REUSEADDR`, never listening), so the
/// server binds it beside the reservation (all of them set `SO_REUSEADDR`), and no other
/// test's `bind(0)` or `connect()` can take it in between. A port picked and let go was
/// taken by another test's simulated server in CI: tether could not bind it, and the test
/// talked to the other server until it stopped.
pub fn free_port() -> u16 {
    static HELD: std::sync::Mutex<Vec<ReservedPort>> = std::sync::Mutex::new(Vec::new());
    let reserved = ReservedPort::new();
    let port = reserved.port;
    HELD.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(reserved);
    port
}

/// Is `pid` running (a zombie waiting for its parent to reap it has exited)?
pub fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

/// `tether -t` on `yaml` (written to `dir/tether.yaml`): its exit code and what it said
/// on stderr.
pub fn tether_t(dir: &Path, yaml: &str) -> (Option<i32>, String) {
    let conf = dir.join("tether.yaml");
    std::fs::write(&conf, yaml).unwrap();
    let out = std::process::Command::new(tether_bin())
        .args(["-t", "-c"])
        .arg(&conf)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn tether_bin() -> &'static str {
    env!("CARGO_BIN_EXE_tether")
}

/// One server line of a cluster: `{ name, address, ...extra }`.
pub fn server_line(sim: &TomcatSim, extra: &str) -> String {
    let sep = if extra.is_empty() { "" } else { ", " };
    format!(
        "      - {{ name: {}, address: \"{}\"{sep}{extra} }}\n",
        sim.name(),
        sim.addr()
    )
}

/// How to start tether: the cluster `shop` (YAML after `- name: shop\n`), and the rest.
#[derive(Default)]
pub struct Opts {
    pub cluster: String,
    pub top: String,
    pub log: Option<&'static str>,
    pub dir: Option<PathBuf>,
    /// Start the admin API on a free port, with this token when given.
    pub admin: bool,
    pub admin_token: Option<&'static str>,
    /// More fields of `admin:` (indented 2), e.g. `tokens:`.
    pub admin_extra: String,
    /// Start the Prometheus listener on a free port.
    pub metrics: bool,
    /// Write the access log to `<dir>/access.log`.
    pub access_log: bool,
    /// YAML list items (indented 6) of the listener's `plugins:`.
    pub listener_plugins: String,
    /// More YAML fields of the listener (indented 4), e.g. `limits:`.
    pub listener_extra: String,
    /// More YAML fields of `server:` (indented 2).
    pub server_extra: String,
    /// More listeners (YAML list items, indented 2), after `web`.
    pub extra_listeners: String,
    /// Leave out `web`'s default cluster (its routes decide).
    pub no_default_cluster: bool,
    /// `server.grace_period_seconds` (0: a graceful stop ends at once).
    pub grace: u64,
    /// `server.threads` (0: 2).
    pub threads: usize,
}

impl Tether {
    /// Starts tether with one listener in front of cluster `shop`.
    pub fn start(cluster: &str) -> Tether {
        Tether::start_with(Opts {
            cluster: cluster.to_string(),
            ..Opts::default()
        })
    }

    /// Starts tether; retries on another port if the one picked was taken meanwhile.
    pub fn start_with(opts: Opts) -> Tether {
        let keep_dir = opts.dir.is_some();
        let dir = opts.dir.unwrap_or_else(|| scratch_dir("tether"));
        std::fs::create_dir_all(&dir).unwrap();
        for _ in 0..3 {
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let admin = opts
                .admin
                .then(|| SocketAddr::from(([127, 0, 0, 1], free_port())));
            let metrics = opts
                .metrics
                .then(|| SocketAddr::from(([127, 0, 0, 1], free_port())));
            let mut top = opts.top.clone();
            if let Some(m) = metrics {
                top.push_str(&format!("metrics:\n  address: \"{m}\"\n"));
            }
            if opts.access_log {
                top.push_str(&format!(
                    "access_log:\n  path: {}/access.log\n",
                    dir.display()
                ));
            }
            if let Some(admin) = admin {
                top.push_str(&format!("admin:\n  address: \"{admin}\"\n"));
                if let Some(token) = opts.admin_token {
                    let file = dir.join("admin.token");
                    std::fs::write(&file, format!("{token}\n")).unwrap();
                    top.push_str(&format!("  token_file: {}\n", file.display()));
                }
                top.push_str(&opts.admin_extra);
            }
            let yaml = format!(
                "server:\n  threads: {threads}\n  grace_period_seconds: {grace}\n  graceful_shutdown_timeout_seconds: 1\n  \
                 pid_file: {d}/tether.pid\n  upgrade_sock: {d}/upgrade.sock\n{server}{top}\
                 listeners:\n  - name: web\n    address: \"{addr}\"\n{default}{extra}{plugins}{more}\
                 clusters:\n  - name: shop\n{cluster}",
                d = dir.display(),
                grace = opts.grace,
                threads = if opts.threads == 0 { 2 } else { opts.threads },
                top = top,
                server = opts.server_extra,
                default = if opts.no_default_cluster { "" } else { "    cluster: shop\n" },
                extra = opts.listener_extra,
                more = opts.extra_listeners,
                plugins = if opts.listener_plugins.is_empty() {
                    String::new()
                } else {
                    format!("    plugins:\n{}", opts.listener_plugins)
                },
                cluster = opts.cluster,
            );
            let conf = dir.join("tether.yaml");
            std::fs::write(&conf, yaml).unwrap();
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("tether.log"))
                .unwrap();
            // A suite run inside a notifying service must not notify it for each tether.
            let mut child = Command::new(tether_bin())
                .env_remove("NOTIFY_SOCKET")
                .arg("-c")
                .arg(&conf)
                .env("RUST_LOG", opts.log.unwrap_or("warn"))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start tether");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                let admin_up = admin.is_none_or(|a| TcpStream::connect(a).is_ok());
                let metrics_up = metrics.is_none_or(|a| TcpStream::connect(a).is_ok());
                if TcpStream::connect(addr).is_ok() && admin_up && metrics_up {
                    return Tether {
                        admin,
                        metrics,
                        addr,
                        dir,
                        child,
                        keep_dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("tether did not start; log: {}", self::log(&dir));
    }

    /// Sends SIGTERM (graceful stop) and waits for the process to exit.
    pub fn terminate(mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("tether did not stop on SIGTERM");
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory of the process, in bytes (from /proc).
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or(0);
        kb * 1024
    }

    /// Is the process still running?
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn log(&self) -> String {
        log(&self.dir)
    }

    pub fn client(&self) -> HttpClient {
        HttpClient::new(self.addr)
    }

    /// The config file tether was started with (tests rewrite it before a reload).
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("tether.yaml")
    }

    /// Calls the admin API; returns (status, JSON body).
    pub async fn admin(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &[u8],
    ) -> (u16, serde_json::Value) {
        let mut c = HttpClient::new(self.admin.expect("started with an admin API"));
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers: Vec<(&str, &[u8])> = Vec::new();
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_bytes()));
        }
        let resp = c
            .request(method, path, &headers, body)
            .await
            .expect("admin call");
        let json = serde_json::from_slice(&resp.body).unwrap_or(serde_json::Value::Null);
        (resp.status, json)
    }

    /// `GET /status` of one server: (state, health, weight).
    pub async fn server_status(&self, token: Option<&str>, server: &str) -> (String, String, u64) {
        let s = servers::status_with(self, token, server).await;
        (
            s["state"].as_str().unwrap().to_string(),
            s["health"].as_str().unwrap().to_string(),
            s["weight"].as_u64().unwrap(),
        )
    }
}

fn log(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("tether.log")).unwrap_or_default()
}

impl Drop for Tether {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The access log's `client` of the request whose path is `path` (waits up to 5 s for the
/// writer).
pub fn logged_client(t: &Tether, path: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(t.dir.join("access.log")).unwrap_or_default();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if v["path"] == path {
                return v["client"].as_str().unwrap_or("").to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "no access log line for {path}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The text of a `/metrics` scrape.
pub async fn scrape(addr: SocketAddr) -> String {
    HttpClient::new(addr)
        .get("/metrics", &[])
        .await
        .expect("scrape")
        .body_str()
        .to_string()
}

/// `tether_engine_requests_total` of listener `web` for `path` (`engine` or `handover`) in
/// a scrape; 0 when the series is not there.
pub fn engine_requests(metrics: &str, path: &str) -> u64 {
    let key = format!("tether_engine_requests_total{{listener=\"web\",path=\"{path}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&key))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// A cluster body: `settings` (indented cluster fields, may be empty), then every server.
pub fn cluster_yaml(settings: &str, sims: &[TomcatSim]) -> String {
    let mut c = format!("{settings}    servers:\n");
    for s in sims {
        c.push_str(&server_line(s, ""));
    }
    c
}

/// Starts simulated Tomcat servers named `tc1`, `tc2`, ... (jvmRoute = name).
pub async fn tomcats(n: usize) -> Vec<TomcatSim> {
    let mut sims = Vec::new();
    for i in 1..=n {
        let name = format!("tc{i}");
        sims.push(TomcatSim::start(&name, &name).await.unwrap());
    }
    sims
}

/// Sends `n` requests without a session on one connection; counts new sessions per server.
pub async fn new_sessions(t: &Tether, n: usize) -> std::collections::HashMap<String, u32> {
    let mut seen = std::collections::HashMap::new();
    let mut c = t.client();
    for _ in 0..n {
        let resp = c.get("/", &[]).await.unwrap();
        assert_eq!(resp.status, 200);
        *seen
            .entry(resp.header("x-server").unwrap().to_string())
            .or_default() += 1;
    }
    seen
}

/// A browser: a keep-alive connection and the session cookie it was given.
pub struct Browser {
    pub http: HttpClient,
    pub cookie: Option<String>,
}

impl Browser {
    pub fn new(t: &Tether) -> Browser {
        Browser {
            http: t.client(),
            cookie: None,
        }
    }

    /// GET `path` with the session cookie; returns (status, server that answered).
    pub async fn get(&mut self, path: &str) -> (u16, String) {
        let cookie = self.cookie.as_ref().map(|c| format!("JSESSIONID={c}"));
        let headers: Vec<(&str, &str)> = cookie.iter().map(|c| ("Cookie", c.as_str())).collect();
        let resp = self.http.get(path, &headers).await.expect("request");
        if let Some(c) = resp.set_cookie("JSESSIONID") {
            self.cookie = Some(c);
        }
        (
            resp.status,
            resp.header("x-server").unwrap_or("").to_string(),
        )
    }
}
