//! Reloads and binary upgrades under load: many keep-alive clients with sticky sessions
//! run while tether reloads (SIGHUP, admin API, file watch) and is upgraded twice with
//! `tether upgrade`; no request may fail and no session may move unless its server was
//! removed. The upgrades also switch the listener between tether's HTTP/1 engine, whose
//! plain listeners accept on their own, and Pingora's proxy, whose listeners are Pingora's:
//! the listening socket goes from one to the other and back, and no connection is refused.

mod common;

use common::daemon::KillOnDrop;
use common::{free_port, running, scratch_dir, tether_bin, tomcats};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tether::cli::sim::{HttpClient, TomcatSim};

const CLIENTS: usize = 24;

struct Setup {
    dir: PathBuf,
    addr: SocketAddr,
    admin: SocketAddr,
    sims: Vec<TomcatSim>,
    /// The listener's `http1:` (its accept loop: tether's for `engine`, Pingora's for
    /// `proxy`).
    http1: std::cell::Cell<&'static str>,
}

impl Setup {
    fn conf(&self) -> PathBuf {
        self.dir.join("tether.yaml")
    }

    /// Writes the config with these weights; the fourth server only when `with_tc4`.
    fn write(&self, weights: [u32; 4], with_tc4: bool) {
        let d = self.dir.display();
        let mut y = format!(
            "server:\n  threads: 2\n  grace_period_seconds: 1\n  graceful_shutdown_timeout_seconds: 2\n  \
             pid_file: {d}/tether.pid\n  upgrade_sock: {d}/upgrade.sock\n  error_log: {d}/daemon.log\n\
             state_dir: {d}/state\nwatch_config: 200ms\n\
             admin: {{ address: \"{}\" }}\n\
             listeners:\n  - {{ name: web, address: \"{}\", cluster: shop, http1: {} }}\n\
             clusters:\n  - name: shop\n    recover_after: 1s\n    servers:\n",
            self.admin,
            self.addr,
            self.http1.get()
        );
        for (i, s) in self.sims.iter().enumerate() {
            if i == 3 && !with_tc4 {
                continue;
            }
            y.push_str(&format!(
                "      - {{ name: {}, address: \"{}\", weight: {} }}\n",
                s.name(),
                s.addr(),
                weights[i]
            ));
        }
        // Write then rename, as an operator's tool would: the watcher never sees half a file.
        let tmp = self.dir.join("tether.yaml.tmp");
        std::fs::write(&tmp, y).unwrap();
        std::fs::rename(tmp, self.conf()).unwrap();
    }

    fn pid(&self) -> i32 {
        tether::process::upgrade::read_pid(&self.dir.join("tether.pid")).unwrap()
    }
}

/// Kills whatever process the pid file names when the test ends, however it ends.
#[derive(Default)]
struct Tally {
    requests: AtomicU64,
    failures: AtomicU64,
    moved: AtomicU64,
    stop: AtomicBool,
}

/// One browser: keep-alive connection, a session, a new session every 40 requests.
async fn browse(addr: SocketAddr, tally: Arc<Tally>, tc4_present: Arc<AtomicBool>, id: usize) {
    let mut http = HttpClient::new(addr);
    let (mut cookie, mut home): (Option<String>, String) = (None, String::new());
    let mut n = 0u64;
    while !tally.stop.load(SeqCst) {
        n += 1;
        if n.is_multiple_of(40) {
            cookie = None;
        }
        let header = cookie.as_ref().map(|c| format!("JSESSIONID={c}"));
        let headers: Vec<(&str, &str)> = header.iter().map(|h| ("Cookie", h.as_str())).collect();
        let result = http.get(&format!("/app/{id}/{n}"), &headers).await;
        tally.requests.fetch_add(1, SeqCst);
        let resp = match result {
            Ok(r) if r.status == 200 => r,
            Ok(r) => {
                eprintln!("client {id}: HTTP {} {}", r.status, r.body_str());
                tally.failures.fetch_add(1, SeqCst);
                continue;
            }
            Err(e) => {
                eprintln!("client {id}: {e}");
                tally.failures.fetch_add(1, SeqCst);
                http = HttpClient::new(addr);
                continue;
            }
        };
        let server = resp.header("x-server").unwrap_or_default().to_string();
        if let Some(c) = resp.set_cookie("JSESSIONID") {
            // A new session: either asked for, or its server was removed.
            if cookie.is_some() && server != home {
                let allowed = home == "tc4" && !tc4_present.load(SeqCst);
                if !allowed {
                    eprintln!("client {id}: session moved from {home} to {server}");
                    tally.moved.fetch_add(1, SeqCst);
                }
            }
            cookie = Some(c);
            home = server;
        } else if server != home {
            eprintln!("client {id}: sticky request went to {server}, not {home}");
            tally.moved.fetch_add(1, SeqCst);
        }
    }
}

fn wait_listening(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "{addr} never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn admin(addr: SocketAddr, method: &str, path: &str) -> u16 {
    HttpClient::new(addr)
        .request(method, path, &[], b"")
        .await
        .unwrap()
        .status
}

fn status_of(json: &serde_json::Value, server: &str) -> String {
    json["clusters"][0]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == server)
        .map(|s| s["state"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

async fn status(addr: SocketAddr) -> serde_json::Value {
    let resp = HttpClient::new(addr).get("/status", &[]).await.unwrap();
    serde_json::from_slice(&resp.body).unwrap()
}

fn upgrade(conf: &Path) {
    let out = Command::new(tether_bin())
        .args(["upgrade", "-c"])
        .arg(conf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tether upgrade failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stdout).trim());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_fails_across_reloads_and_binary_upgrades() {
    let sims = tomcats(4).await;
    let setup = Setup {
        dir: scratch_dir("upgrade"),
        addr: SocketAddr::from(([127, 0, 0, 1], free_port())),
        admin: SocketAddr::from(([127, 0, 0, 1], free_port())),
        sims,
        http1: std::cell::Cell::new("engine"),
    };
    setup.write([1, 1, 1, 1], true);
    let guard = KillOnDrop(setup.dir.join("tether.pid"));
    let mut replaced = Vec::new();
    let log = std::fs::File::create(setup.dir.join("first.log")).unwrap();
    let mut first = Command::new(tether_bin())
        .arg("-c")
        .arg(setup.conf())
        .env("RUST_LOG", "warn,tether=info")
        .stderr(log)
        .spawn()
        .unwrap();
    wait_listening(setup.addr);
    wait_listening(setup.admin);

    let tally = Arc::new(Tally::default());
    let tc4_present = Arc::new(AtomicBool::new(true));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| tokio::spawn(browse(setup.addr, tally.clone(), tc4_present.clone(), id)))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    // An operator drains tc3: the change must survive reloads and upgrades.
    assert_eq!(
        admin(setup.admin, "POST", "/clusters/shop/servers/tc3/drain").await,
        200
    );

    let weights = [
        [2, 1, 1, 1],
        [1, 3, 1, 2],
        [4, 1, 2, 1],
        [1, 1, 1, 3],
        [2, 2, 1, 1],
        [3, 1, 1, 1],
    ];
    let mut reloads = 0;
    for round in 0..12 {
        let w = weights[round % weights.len()];
        let with_tc4 = round % 4 != 1;
        if !with_tc4 {
            tc4_present.store(false, SeqCst);
        }
        setup.write(w, with_tc4);
        match round % 3 {
            // SIGHUP
            0 => {
                let pid = setup.pid().to_string();
                assert!(Command::new("kill")
                    .args(["-HUP", &pid])
                    .status()
                    .unwrap()
                    .success());
            }
            // The admin API
            1 => assert_eq!(admin(setup.admin, "POST", "/reload").await, 200),
            // The file watcher (watch_config: 200ms) picks the change up by itself.
            _ => {}
        }
        reloads += 1;
        tokio::time::sleep(Duration::from_millis(600)).await;
        if with_tc4 {
            tc4_present.store(true, SeqCst);
        }
        let s = status(setup.admin).await;
        let names: Vec<&str> = s["clusters"][0]["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names.contains(&"tc4"),
            with_tc4,
            "reload {round} applied: {names:?}"
        );
        assert_eq!(
            status_of(&s, "tc3"),
            "draining",
            "the drain survives reload {round}"
        );
        if round == 4 || round == 9 {
            replaced.push(setup.pid());
            // engine -> proxy, then back.
            setup.http1.set(if round == 4 { "proxy" } else { "engine" });
            setup.write(w, with_tc4);
            upgrade(&setup.conf());
            tokio::time::sleep(Duration::from_millis(300)).await;
            let s = status(setup.admin).await;
            assert_eq!(
                status_of(&s, "tc3"),
                "draining",
                "the drain survives the upgrade"
            );
        }
    }
    tally.stop.store(true, SeqCst);
    for c in clients {
        c.await.unwrap();
    }
    let _ = first.wait();
    let (requests, failures, moved) = (
        tally.requests.load(SeqCst),
        tally.failures.load(SeqCst),
        tally.moved.load(SeqCst),
    );
    eprintln!("{requests} requests over {reloads} reloads and 2 upgrades: {failures} failed, {moved} sessions moved");
    assert!(requests > 1_000, "the load ran ({requests} requests)");
    assert_eq!(failures, 0, "no request failed");
    assert_eq!(moved, 0, "no session left a server that stayed");
    assert!(reloads >= 10);
    // The replaced processes drained and exited on their own.
    let deadline = Instant::now() + Duration::from_secs(20);
    while replaced.iter().any(|&pid| running(pid)) {
        assert!(
            Instant::now() < deadline,
            "an old process did not exit: {replaced:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(guard);
    let _ = std::fs::remove_dir_all(&setup.dir);
}
