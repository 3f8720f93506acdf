//! The soak's fleet: two tether instances sharing one Redis, in front of three simulated
//! Tomcats (`/`) and three WebSphere clones (`/was/`), each instance with a plain and a
//! TLS listener (HTTP/1.1 and HTTP/2), an admin API and metrics; and what the faults do to
//! them (reload, binary upgrade, drain) and read from them (RSS, open fds).

use crate::common::pki::Pki;
use crate::common::redis::Redis;
use crate::common::{free_port, running, tether_bin, tomcats};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tether::cli::sim::{HttpClient, TomcatSim, WasCluster, WebSphereSim};

/// Settings every instance shares; the weights of the Tomcats change with each reload.
pub struct Settings {
    pub redis_url: String,
    pub cert: String,
    pub key: String,
    pub tomcats: Vec<(String, SocketAddr)>,
    pub clones: Vec<(String, SocketAddr, String)>,
}

pub struct Instance {
    pub name: &'static str,
    pub dir: PathBuf,
    pub plain: SocketAddr,
    pub tls: SocketAddr,
    pub admin: SocketAddr,
    pub metrics: SocketAddr,
    /// The process started first; an upgrade replaces it with a daemon (the pid file's).
    first: Option<Child>,
}

pub struct Fleet {
    pub pki: Pki,
    pub redis: std::sync::Mutex<Redis>,
    pub tomcats: Vec<TomcatSim>,
    pub was_cluster: WasCluster,
    pub clones: Vec<WebSphereSim>,
    pub instances: [Instance; 2],
    settings: Settings,
}

impl Instance {
    fn new(name: &'static str, root: &std::path::Path) -> Instance {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("state")).unwrap();
        let port = || SocketAddr::from(([127, 0, 0, 1], free_port()));
        Instance {
            name,
            dir,
            plain: port(),
            tls: port(),
            admin: port(),
            metrics: port(),
            first: None,
        }
    }

    pub fn conf(&self) -> PathBuf {
        self.dir.join("tether.yaml")
    }

    /// The running process's id (from the pid file: an upgrade changes it).
    pub fn pid(&self) -> Option<i32> {
        tether::process::upgrade::read_pid(&self.dir.join("tether.pid")).ok()
    }

    /// Writes the config, the Tomcats weighted `weights`; written whole, then renamed.
    pub fn write(&self, s: &Settings, weights: &[u32]) {
        let d = self.dir.display();
        let limits = "    limits: { request_head_timeout: 5s, keepalive_timeout: 30s, \
                      max_request_head: 16384 }\n";
        let routes = "    routes:\n      - { path: \"/was/*\", cluster: was }\n";
        let mut y = format!(
            "server:\n  threads: 2\n  grace_period_seconds: 1\n  \
             graceful_shutdown_timeout_seconds: 3\n  pid_file: {d}/tether.pid\n  \
             upgrade_sock: {d}/upgrade.sock\n  error_log: {d}/daemon.log\n\
             state_dir: {d}/state\n\
             admin: {{ address: \"{admin}\" }}\n\
             metrics: {{ address: \"{metrics}\" }}\n\
             shared_state: {{ url: \"{url}\", instance: {name}, key_prefix: soak }}\n\
             listeners:\n  - name: web\n    address: \"{plain}\"\n    cluster: tomcat\n{routes}{limits}\
             \x20 - name: tls\n    address: \"{tls}\"\n    cluster: tomcat\n{routes}{limits}\
             \x20   tls: {{ cert: {cert}, key: {key} }}\n\
             clusters:\n  - name: tomcat\n    recover_after: 2s\n    \
             health_check: {{ kind: tcp, interval: 1s, timeout: 500ms, rise: 1, fall: 1 }}\n    \
             servers:\n",
            admin = self.admin,
            metrics = self.metrics,
            url = s.redis_url,
            name = self.name,
            plain = self.plain,
            tls = self.tls,
            cert = s.cert,
            key = s.key,
        );
        for ((name, addr), w) in s.tomcats.iter().zip(weights) {
            y.push_str(&format!(
                "      - {{ name: {name}, address: \"{addr}\", weight: {w} }}\n"
            ));
        }
        y.push_str(
            "  - name: was\n    session_style: websphere\n    recover_after: 2s\n    \
             health_check: { kind: tcp, interval: 1s, timeout: 500ms, rise: 1, fall: 1 }\n    \
             servers:\n",
        );
        for (name, addr, clone) in &s.clones {
            y.push_str(&format!(
                "      - {{ name: {name}, address: \"{addr}\", clone_id: {clone} }}\n"
            ));
        }
        let tmp = self.dir.join("tether.yaml.tmp");
        std::fs::write(&tmp, y).unwrap();
        std::fs::rename(tmp, self.conf()).unwrap();
    }

    fn start(&mut self) {
        let log = std::fs::File::create(self.dir.join("first.log")).unwrap();
        let child = Command::new(tether_bin())
            .arg("-c")
            .arg(self.conf())
            .env("RUST_LOG", "warn,tether=info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start tether");
        self.first = Some(child);
        for addr in [self.plain, self.tls, self.admin, self.metrics] {
            wait_listening(addr);
        }
    }

    /// Reloads the config (SIGHUP).
    pub fn reload(&self) {
        if let Some(pid) = self.pid() {
            signal(pid, "-HUP");
        }
    }

    /// `tether upgrade`: a new process takes the sockets over, the old one finishes its
    /// requests and exits. Its output, or why it failed.
    pub fn upgrade(&self) -> Result<String, String> {
        let out = Command::new(tether_bin())
            .args(["upgrade", "-c"])
            .arg(self.conf())
            .output()
            .map_err(|e| e.to_string())?;
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            Ok(said.trim().to_string())
        } else {
            Err(said)
        }
    }

    /// One admin call: its status.
    pub async fn admin(&self, method: &str, path: &str) -> u16 {
        HttpClient::new(self.admin)
            .request(method, path, &[], b"")
            .await
            .map(|r| r.status)
            .unwrap_or(0)
    }

    /// Each server's health as this instance sees it: `cluster/server=health`, one string.
    pub async fn health(&self) -> String {
        let r = HttpClient::new(self.admin).get("/status", &[]).await;
        let Ok(json) = r.map(|r| serde_json::from_slice::<serde_json::Value>(&r.body)) else {
            return "no status".into();
        };
        let Ok(json) = json else {
            return "no status".into();
        };
        let mut out = Vec::new();
        for c in json["clusters"].as_array().into_iter().flatten() {
            for s in c["servers"].as_array().into_iter().flatten() {
                out.push(format!(
                    "{}/{}={}",
                    c["name"].as_str().unwrap_or("?"),
                    s["name"].as_str().unwrap_or("?"),
                    s["health"].as_str().unwrap_or("?")
                ));
            }
        }
        out.join(" ")
    }

    /// Resident memory in KiB and open file descriptors, from /proc.
    pub fn rss_and_fds(&self) -> (u64, u64) {
        let Some(pid) = self.pid() else {
            return (0, 0);
        };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| d.count() as u64)
            .unwrap_or(0);
        (rss, fds)
    }

    /// Stops the running process (SIGINT: at once) and reaps the first one.
    fn stop(&mut self) {
        if let Some(pid) = self.pid() {
            signal(pid, "-INT");
            let deadline = Instant::now() + Duration::from_secs(5);
            while running(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if running(pid) {
                signal(pid, "-KILL");
            }
        }
        if let Some(mut c) = self.first.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Fleet {
    pub async fn start(dir: PathBuf) -> Fleet {
        let pki = Pki::new(&dir.join("pki"));
        let redis = Redis::start(&dir.join("redis"));
        let tomcats = tomcats(3).await;
        let (was_cluster, clones) = crate::common::fleet::was_cluster().await;
        let settings = Settings {
            redis_url: redis.url(),
            cert: pki.path("a.crt"),
            key: pki.path("a.key"),
            tomcats: tomcats
                .iter()
                .map(|t| (t.name().to_string(), t.addr()))
                .collect(),
            clones: clones
                .iter()
                .map(|c| (c.name().to_string(), c.addr(), c.clone_id().to_string()))
                .collect(),
        };
        let mut instances = [Instance::new("a", &dir), Instance::new("b", &dir)];
        for i in &mut instances {
            i.write(&settings, &[1, 1, 1]);
            i.start();
        }
        Fleet {
            pki,
            redis: std::sync::Mutex::new(redis),
            tomcats,
            was_cluster,
            clones,
            instances,
            settings,
        }
    }

    /// Kills Redis, and starts it again on its port after `down`.
    pub async fn restart_redis(&self, down: Duration) {
        tokio::task::block_in_place(|| self.redis.lock().unwrap().kill());
        tokio::time::sleep(down).await;
        tokio::task::block_in_place(|| self.redis.lock().unwrap().launch());
    }

    /// Waits until both instances see every server up (a cluster with health checks
    /// starts down).
    pub async fn all_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut up = true;
            for i in &self.instances {
                let h = i.health().await;
                up &= !h.is_empty() && h.split(' ').all(|s| s.ends_with("=up"));
            }
            if up {
                return;
            }
            assert!(Instant::now() < deadline, "servers never all up");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Rewrites both configs with these Tomcat weights and reloads both.
    pub fn reweigh(&self, weights: &[u32]) {
        for i in &self.instances {
            i.write(&self.settings, weights);
            i.reload();
        }
    }
}

fn wait_listening(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "{addr} never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: i32, sig: &str) {
    let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
}
