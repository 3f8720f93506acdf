//! `tether demo --fleet`: two tether processes sharing one `redis-server`, in front of the
//! simulated WebSphere clones. Sessions alternate between the two instances, as behind an
//! L4 balancer; a drain through one reaches the other; a clone dies and both instances
//! fail its sessions over to the same replica.

use super::tomcat::{line, wait_ready};
use super::CLONES;
use crate::cli::sim::{HttpClient, WasCluster, WebSphereSim};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// A child process that dies with the demo (and is killed when dropped).
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(cmd: &mut Command) -> std::io::Result<Proc> {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to SIGTERM the child
    // when this process dies (Ctrl-C), so no redis-server or tether is left behind.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    cmd.spawn().map(Proc)
}

fn free() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
}

/// One tether instance of the demo fleet.
struct Edge {
    name: &'static str,
    web: SocketAddr,
    admin: SocketAddr,
    _proc: Proc,
}

fn edge_yaml(
    name: &str,
    dir: &Path,
    web: SocketAddr,
    admin: SocketAddr,
    redis: &str,
    clones: &[WebSphereSim],
) -> String {
    let mut y = format!(
        "server:\n  threads: 1\n  grace_period_seconds: 0\n  graceful_shutdown_timeout_seconds: 1\n  \
         pid_file: {d}/{name}.pid\n  upgrade_sock: {d}/{name}.sock\n\
         admin:\n  address: \"{admin}\"\n\
         shared_state:\n  url: \"{redis}\"\n  instance: {name}\n  key_prefix: demo-{pid}\n\
         listeners:\n  - {{ name: web, address: \"{web}\", cluster: was }}\n\
         clusters:\n  - name: was\n    session_style: websphere\n    recover_after: 60s\n    servers:\n",
        d = dir.display(),
        pid = std::process::id(),
    );
    for (sim, (n, clone, _)) in clones.iter().zip(CLONES) {
        y.push_str(&format!(
            "      - {{ name: {n}, address: \"{}\", clone_id: {clone} }}\n",
            sim.addr()
        ));
    }
    y
}

async fn status(admin: SocketAddr) -> serde_json::Value {
    match HttpClient::new(admin).get("/status", &[]).await {
        Ok(r) => serde_json::from_slice(&r.body).unwrap_or_default(),
        Err(_) => serde_json::Value::Null,
    }
}

/// Waits until `check` holds on `edge`'s status (up to 5 s); returns how long it took.
async fn until(edge: &Edge, check: impl Fn(&serde_json::Value) -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if check(&status(edge.admin).await) {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

fn took(d: Option<Duration>) -> String {
    d.map_or("not within 5 s".into(), |d| {
        format!("after {} ms", d.as_millis())
    })
}

/// One request of a session through `edge`: (status, server, count, cookie).
async fn visit(edge: &Edge, cookie: &str) -> Option<(String, u64, String)> {
    let header = format!("JSESSIONID={cookie}");
    let headers: Vec<(&str, &str)> = if cookie.is_empty() {
        vec![]
    } else {
        vec![("Cookie", &header)]
    };
    let resp = HttpClient::new(edge.web).get("/app", &headers).await.ok()?;
    if resp.status != 200 {
        return None;
    }
    let id = resp
        .set_cookie("JSESSIONID")
        .unwrap_or_else(|| cookie.to_string());
    let count = resp.header("x-session-count")?.parse().ok()?;
    Some((resp.header("x-server")?.to_string(), count, id))
}

fn wsfo(clones: &[WebSphereSim]) -> u64 {
    clones.iter().map(|c| c.wsfo_received()).sum()
}

pub fn run() -> ExitCode {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status();
    if !found.is_ok_and(|s| s.success()) {
        eprintln!(
            "tether demo --fleet needs redis-server (Debian: apt-get install -y redis-server; `./run demo --fleet` installs it)"
        );
        return ExitCode::from(2);
    }
    let Ok(exe) = std::env::current_exe() else {
        eprintln!("tether demo --fleet: cannot find this binary");
        return ExitCode::FAILURE;
    };
    let Some(rt) = super::runtime("tether demo --fleet") else {
        return ExitCode::FAILURE;
    };
    let dir: PathBuf =
        std::env::temp_dir().join(format!("tether-fleet-demo-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let code = rt.block_on(scenario(&exe, &dir));
    let _ = std::fs::remove_dir_all(&dir);
    code
}

async fn scenario(exe: &Path, dir: &Path) -> ExitCode {
    let was = WasCluster::new();
    let mut clones = Vec::new();
    for (name, clone, partitions) in CLONES {
        match WebSphereSim::start(&was, name, clone, &partitions).await {
            Ok(c) => clones.push(c),
            Err(e) => {
                eprintln!("tether demo --fleet: cannot start the simulated clones: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let redis_addr = free();
    let redis = spawn(
        Command::new("redis-server")
            .args([
                "--port",
                &redis_addr.port().to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null()),
    );
    let Ok(redis) = redis else {
        eprintln!("tether demo --fleet: cannot start redis-server");
        return ExitCode::FAILURE;
    };
    wait_ready(redis_addr).await;
    let url = format!("redis://{redis_addr}/0");
    let mut edges = Vec::new();
    for name in ["edge-1", "edge-2"] {
        let (web, admin) = (free(), free());
        let conf = dir.join(format!("{name}.yaml"));
        let log = std::fs::File::create(dir.join(format!("{name}.log")));
        let written = std::fs::write(&conf, edge_yaml(name, dir, web, admin, &url, &clones));
        let (Ok(log), Ok(())) = (log, written) else {
            eprintln!("tether demo --fleet: cannot write under {}", dir.display());
            return ExitCode::FAILURE;
        };
        let proc = spawn(
            Command::new(exe)
                .arg("-c")
                .arg(&conf)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(log),
        );
        let Ok(proc) = proc else {
            eprintln!("tether demo --fleet: cannot start {}", exe.display());
            return ExitCode::FAILURE;
        };
        wait_ready(web).await;
        wait_ready(admin).await;
        edges.push(Edge {
            name,
            web,
            admin,
            _proc: proc,
        });
    }
    println!("tether demo --fleet");
    println!("  redis-server on {redis_addr} (pid {})", redis.0.id());
    for e in &edges {
        println!(
            "  {} http://{}  (admin API http://{})",
            e.name, e.web, e.admin
        );
    }
    println!("  both -> 3 simulated WebSphere clones with memory-to-memory replication");
    play(&edges, &was, &clones).await;
    println!("\ntether fleet keeps serving (Ctrl-C to stop). Try:");
    for e in &edges {
        println!("  curl -s http://{}/status | head -c 600; echo", e.admin);
    }
    println!(
        "  redis-cli -p {} HGETALL '{{demo-{}}}:partitions:was'",
        redis_addr.port(),
        std::process::id()
    );
    // Ctrl-C or SIGTERM: the instances and redis-server are stopped on the way out.
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        _ => std::future::pending::<()>().await,
    }
    drop(edges);
    drop(redis);
    ExitCode::SUCCESS
}

async fn play(edges: &[Edge], was: &WasCluster, clones: &[WebSphereSim]) {
    let table = |s: &serde_json::Value| {
        s["clusters"][0]["partition_table"]["size"]
            .as_u64()
            .unwrap_or(0)
    };
    println!("\n1. 20 new sessions through edge-1; edge-1 learns the partition table from $WSPT");
    let mut sessions = Vec::new();
    for _ in 0..20 {
        if let Some((server, count, id)) = visit(&edges[0], "").await {
            sessions.push((id, server, count));
        }
    }
    let t = until(&edges[1], |s| table(s) == 6).await;
    line(
        "edge-2's partition table, through Redis",
        format!("6 partitions {}", took(t)),
    );

    println!("\n2. each session's requests alternate between edge-1 and edge-2");
    let (mut home, mut total) = (0, 0);
    for round in 0..6 {
        for (i, (id, server, count)) in sessions.iter_mut().enumerate() {
            total += 1;
            if let Some((s, c, _)) = visit(&edges[(round + i) % 2], id).await {
                if s == *server && c == *count + 1 {
                    home += 1;
                }
                *count = c;
            }
        }
    }
    line(
        "requests answered by the session's server",
        format!("{home}/{total}"),
    );
    line("requests carrying $WSFO", wsfo(clones));

    println!("\n3. was2 drained through edge-1's admin API");
    let _ = HttpClient::new(edges[0].admin)
        .request("POST", "/clusters/was/servers/was2/drain", &[], b"")
        .await;
    let state = |s: &serde_json::Value| s["clusters"][0]["servers"][1]["state"] == "draining";
    line(
        "edge-2 sees was2 draining",
        took(until(&edges[1], state).await),
    );
    let mut on_was2 = 0;
    for i in 0..20 {
        if let Some((s, _, _)) = visit(&edges[i % 2], "").await {
            on_was2 += (s == "was2") as u32;
        }
    }
    line("new sessions on was2 (10 through each edge)", on_was2);

    let victim = &clones[0];
    println!(
        "\n4. {} is killed: its sessions fail over through edge-1, then go on through edge-2",
        victim.name()
    );
    victim.stop().await;
    let tagged = wsfo(clones);
    let (mut kept, mut moved) = (0, 0);
    for (id, server, count) in sessions.iter_mut().filter(|s| s.1 == "was1") {
        moved += 1;
        if let Some((s, c, _)) = visit(&edges[0], id).await {
            kept += (c == *count + 1) as u32;
            (*server, *count) = (s, c);
        }
    }
    line(
        "sessions whose data survived (from the replica)",
        format!("{kept}/{moved}"),
    );
    line("requests that carried $WSFO", wsfo(clones) - tagged);
    let _ = victim.restart().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (stale, tagged) = (victim.requests(), wsfo(clones));
    let mut same = 0;
    for (id, server, count) in sessions.iter_mut().filter(|s| s.1 != "was1") {
        if let Some((s, c, _)) = visit(&edges[1], id).await {
            same += (s == *server && c == *count + 1) as u32;
            *count = c;
        }
    }
    line(
        "requests through edge-2 at the same server",
        format!("{same}/{}", sessions.len()),
    );
    line(
        "requests to was1 after it came back (stale)",
        victim.requests() - stale,
    );
    line("new $WSFO tags", wsfo(clones) - tagged);
    let owner = was.owner("7329011").unwrap_or_default();
    line("partition 7329011 is now owned by", owner);
}
