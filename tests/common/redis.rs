//! A real `redis-server` for fleet tests, on a free loopback port, with no persistence.
//! `./run` installs Debian's `redis-server`; a test fails with a clear message without it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Redis {
    /// The port, held for this server while it lives (see [`super::ReservedPort`]): a
    /// port picked, released and bound later was taken meanwhile by another test's
    /// connection in CI.
    reserved: super::ReservedPort,
    dir: PathBuf,
    /// More arguments for `redis-server` (a replica's `--replicaof`, say).
    args: Vec<String>,
    /// A config file, given first (a sentinel's, which Sentinel rewrites).
    conf: Option<PathBuf>,
    /// `redis-cli`'s arguments for reaching it (`--tls --cacert` for a TLS-only server).
    cli_args: Vec<String>,
    child: Option<Child>,
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
}

impl Redis {
    /// Starts Redis on a free port, its files in `dir`.
    pub fn start(dir: &Path) -> Redis {
        Redis::start_with(dir, &[])
    }

    /// Starts Redis with more `redis-server` arguments.
    pub fn start_with(dir: &Path, args: &[&str]) -> Redis {
        let reserved = super::ReservedPort::new();
        let mut r = Redis {
            reserved,
            dir: dir.to_path_buf(),
            args: args.iter().map(|a| a.to_string()).collect(),
            conf: None,
            cli_args: Vec::new(),
            child: None,
        };
        r.launch();
        r
    }

    /// Starts Redis serving TLS only (no plain port) on a free port, with the PEM files
    /// `cert` and `key`; clients need no certificate. `ca` (the CA that signed `cert`) is
    /// what `redis-server` requires and what `redis-cli` checks the server with.
    pub fn start_tls(dir: &Path, cert: &str, key: &str, ca: &str) -> Redis {
        let reserved = super::ReservedPort::new();
        let port = reserved.port.to_string();
        let args = [
            "--port",
            "0",
            "--tls-port",
            &port,
            "--tls-cert-file",
            cert,
            "--tls-key-file",
            key,
            "--tls-ca-cert-file",
            ca,
            "--tls-auth-clients",
            "no",
        ];
        let mut r = Redis {
            reserved,
            dir: dir.to_path_buf(),
            args: args.iter().map(|a| a.to_string()).collect(),
            conf: None,
            cli_args: ["--tls", "--cacert", ca].map(String::from).to_vec(),
            child: None,
        };
        r.launch();
        r
    }

    /// A Sentinel watching `master` under the name `name`, deciding alone (quorum 1) and
    /// fast (down after 500 ms).
    pub fn sentinel(dir: &Path, name: &str, master: &Redis) -> Redis {
        std::fs::create_dir_all(dir).unwrap();
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "sentinel monitor {name} 127.0.0.1 {p} 1\n\
                 sentinel down-after-milliseconds {name} 500\n\
                 sentinel failover-timeout {name} 3000\n",
                p = master.port()
            ),
        )
        .unwrap();
        let reserved = super::ReservedPort::new();
        let mut r = Redis {
            reserved,
            dir: dir.to_path_buf(),
            args: vec!["--sentinel".into()],
            conf: Some(conf),
            cli_args: Vec::new(),
            child: None,
        };
        r.launch();
        r
    }

    /// The port was picked and is not started yet (for "Redis down at start" tests).
    pub fn not_started(dir: &Path) -> Redis {
        let reserved = super::ReservedPort::new();
        Redis {
            reserved,
            dir: dir.to_path_buf(),
            args: Vec::new(),
            conf: None,
            cli_args: Vec::new(),
            child: None,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.reserved.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port())
    }

    /// The URL of a server started with [`Redis::start_tls`].
    pub fn tls_url(&self) -> String {
        format!("rediss://127.0.0.1:{}/0", self.port())
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port()))
    }

    /// Starts (again) on the same port, empty.
    pub fn launch(&mut self) {
        assert!(self.child.is_none(), "already running");
        std::fs::create_dir_all(&self.dir).unwrap();
        let log_path = self.dir.join("redis-server.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap();
        let mut cmd = Command::new("redis-server");
        if let Some(conf) = &self.conf {
            cmd.arg(conf);
        }
        // A TLS-only server names its ports (`--port 0 --tls-port N`) in `args`.
        if !self.args.iter().any(|a| a == "--port") {
            cmd.args(["--port", &self.port().to_string()]);
        }
        let child = cmd
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("redis-server is not installed: run ./run test, which installs it");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.cli(&["PING"]).trim() == "PONG" {
                return;
            }
            if let Ok(Some(status)) = self.child.as_mut().unwrap().try_wait() {
                self.child = None;
                panic!(
                    "redis-server on port {} ({:?}) exited ({status}):\n{}",
                    self.port(),
                    self.reserved,
                    std::fs::read_to_string(&log_path).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "redis-server did not start on port {}:\n{}",
            self.port(),
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
    }

    /// Kills the server (its data dies with it).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Freezes the process (a network stall, as tether sees it).
    pub fn pause(&self) {
        signal(self.pid(), "-STOP");
    }

    pub fn resume(&self) {
        signal(self.pid(), "-CONT");
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Runs `redis-cli` against this server; returns its output.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port().to_string()])
            .args(&self.cli_args)
            .args(args)
            .output()
            .expect("redis-cli is not installed: run ./run test, which installs it");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            // A paused server would not die of SIGTERM; SIGKILL it.
            signal(c.id(), "-CONT");
        }
        self.kill();
    }
}
