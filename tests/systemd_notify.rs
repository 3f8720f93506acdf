//! systemd's notifications without systemd: tether runs with `NOTIFY_SOCKET` naming a Unix
//! datagram socket this test binds (with `SO_PASSCRED`, as systemd does, so each message
//! comes with the pid that sent it). `READY=1` comes once every listening address accepts
//! connections; `STOPPING=1` once, as a stop begins (`SIGTERM`, `SIGINT`); an abstract
//! socket (`@name`) works as a path does. In `tether upgrade` the running process starts the new binary
//! itself (as inside a service), from the path it was started from, the new process sends
//! `MAINPID=<its pid>` and then `READY=1` before the old one exits, the old one never sends
//! `STOPPING=1`, and requests are served throughout; a new binary that fails leaves the old
//! process serving.

mod common;
#[path = "common/notify_socket.rs"]
mod notify_socket;

use common::daemon::KillOnDrop;
use common::{free_port, running, scratch_dir, server_line, tether_bin, tomcats};
use notify_socket::NotifySocket;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tether::cli::sim::{HttpClient, TomcatSim};

/// One notification: who sent it, what it said, and whether `watched` was still running
/// when it arrived.
#[derive(Debug, Clone)]
struct Message {
    pid: i32,
    text: String,
    watched_alive: bool,
}

impl Message {
    fn says(&self, line: &str) -> bool {
        self.text.lines().any(|l| l == line)
    }
}

/// The listener on tether's own front ends, named, so that both of the suite's passes run
/// the same tests: they are about the notifications, not the front ends (one test below
/// stops Pingora's proxy).
fn config(dir: &Path, addr: SocketAddr, sims: &[TomcatSim], top: &str) -> PathBuf {
    let d = dir.display();
    let mut y = format!(
        "server:\n  threads: 2\n  grace_period_seconds: 5\n  graceful_shutdown_timeout_seconds: 1\n  \
         pid_file: {d}/tether.pid\n  upgrade_sock: {d}/upgrade.sock\n{top}\
         listeners:\n  - {{ name: web, address: \"{addr}\", cluster: shop, http1: engine, http2: engine }}\n\
         clusters:\n  - name: shop\n    servers:\n"
    );
    for s in sims {
        y.push_str(&server_line(s, ""));
    }
    let file = dir.join("tether.yaml");
    std::fs::write(&file, y).unwrap();
    file
}

/// tether in the foreground, as systemd runs it: `NOTIFY_SOCKET` set, stderr to a file.
fn start(dir: &Path, conf: &Path, notify: &NotifySocket) -> Child {
    start_from(Path::new(tether_bin()), dir, conf, notify)
}

/// [`start`], with the binary at `binary` (the unit's `ExecStart=` path).
fn start_from(binary: &Path, dir: &Path, conf: &Path, notify: &NotifySocket) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("tether.log"))
        .unwrap();
    Command::new(binary)
        .arg("-c")
        .arg(conf)
        .env("NOTIFY_SOCKET", &notify.name)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("tether.log")).unwrap_or_default()
}

fn kill(pid: i32, signal: i32) {
    // SAFETY: kill(2) on a process this test started, with a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

fn wait_exit(child: &mut Child, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    panic!("pid {} did not exit in {timeout:?}", child.id());
}

async fn get_ok(addr: SocketAddr) {
    let resp = HttpClient::new(addr).get("/", &[]).await.unwrap();
    assert_eq!(resp.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_once_every_listener_accepts_and_stopping_at_sigterm() {
    let sims = tomcats(1).await;
    let dir = scratch_dir("notify-ready");
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let conf = config(
        &dir,
        addr,
        &sims,
        &format!("metrics:\n  address: \"{metrics}\"\n"),
    );
    let notify = NotifySocket::at_path(&dir);
    let mut child = start(&dir, &conf, &notify);
    let pid = child.id() as i32;
    let seen = notify.wait_for(pid, "READY=1", Duration::from_secs(15));
    // Connected to at once: both addresses accept when READY=1 arrives.
    for a in [addr, metrics] {
        TcpStream::connect(a).unwrap_or_else(|e| panic!("{a} after READY=1: {e}"));
    }
    get_ok(addr).await;
    assert!(
        seen.iter()
            .any(|(from, text)| *from == pid && text.lines().any(|l| l == format!("MAINPID={pid}"))),
        "MAINPID={pid} before READY=1: {seen:?}"
    );
    let (_, ready) = seen.last().unwrap();
    assert!(
        ready.contains(&addr.to_string()) && ready.contains(&metrics.to_string()),
        "STATUS= names the addresses: {ready}"
    );

    kill(pid, libc::SIGTERM);
    notify.wait_for(pid, "STOPPING=1", Duration::from_secs(5));
    wait_exit(&mut child, Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_at_sigint_through_an_abstract_socket() {
    let sims = tomcats(1).await;
    let dir = scratch_dir("notify-int");
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let conf = config(&dir, addr, &sims, "");
    let notify = NotifySocket::in_abstract_namespace("int");
    let mut child = start(&dir, &conf, &notify);
    let pid = child.id() as i32;
    notify.wait_for(pid, "READY=1", Duration::from_secs(15));
    // Ready means a stop signal is handled: sent at once, it still stops tether its way.
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let handled = tether::process::systemd::catches(pid, signal);
        assert!(handled, "signal {signal} handled when READY=1 comes");
    }
    get_ok(addr).await;
    kill(pid, libc::SIGINT);
    notify.wait_for(pid, "STOPPING=1", Duration::from_secs(5));
    wait_exit(&mut child, Duration::from_secs(10));
}

/// On Pingora's proxy, with clients held: `STOPPING=1` comes when the stop begins, once,
/// and the process ends at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_at_sigint_on_pingoras_proxy_comes_when_the_stop_begins() {
    let sims = tomcats(1).await;
    let dir = scratch_dir("notify-int-proxy");
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let conf = config(&dir, addr, &sims, "");
    let text = std::fs::read_to_string(&conf).unwrap();
    let proxied = text.replace("http1: engine, http2: engine", "http1: proxy, http2: proxy");
    assert_ne!(text, proxied, "the listener names its front ends");
    std::fs::write(&conf, proxied).unwrap();
    let notify = NotifySocket::in_abstract_namespace("int-proxy");
    let mut child = start(&dir, &conf, &notify);
    let pid = child.id() as i32;
    notify.wait_for(pid, "READY=1", Duration::from_secs(15));
    for _ in 0..3 {
        get_ok(addr).await;
    }
    // Clients that stay: idle ones, and one whose request head is not complete.
    let mut held = Vec::new();
    for i in 0..20 {
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        if i == 0 {
            tokio::io::AsyncWriteExt::write_all(&mut c, b"GET / HTTP/1.1\r\nHost: x\r\n")
                .await
                .unwrap();
        }
        held.push(c);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    kill(pid, libc::SIGINT);
    let said = Instant::now();
    notify.wait_for(pid, "STOPPING=1", Duration::from_secs(2));
    println!("STOPPING=1 {:?} after SIGINT", said.elapsed());
    wait_exit(&mut child, Duration::from_secs(5));
    let mut later = Vec::new();
    while let Some(message) = notify.recv() {
        later.push(message);
    }
    let again = later
        .iter()
        .any(|(_, text)| text.lines().any(|l| l == "STOPPING=1"));
    assert!(!again, "STOPPING=1 is said once: {later:?}");
}

/// The parent of process `pid` (from /proc).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upgrade_hands_the_main_pid_over_before_the_old_process_exits() {
    let sims = tomcats(1).await;
    let dir = scratch_dir("notify-upgrade");
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let conf = config(&dir, addr, &sims, "");
    let pid_file = dir.join("tether.pid");
    let _guard = KillOnDrop(pid_file.clone());
    let notify = NotifySocket::at_path(&dir);
    // The unit's path: a link, switched to a broken binary, then back.
    let unit_path = dir.join("tether");
    std::os::unix::fs::symlink(tether_bin(), &unit_path).unwrap();
    let mut old_child = start_from(&unit_path, &dir, &conf, &notify);
    let old = old_child.id() as i32;
    notify.wait_for(old, "READY=1", Duration::from_secs(15));

    // Requests all along: a new connection for each, and one keep-alive connection.
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut load = Vec::new();
    for keep_alive in [false, true] {
        let (stop, served, failures) = (stop.clone(), served.clone(), failures.clone());
        load.push(tokio::spawn(async move {
            let mut kept = HttpClient::new(addr);
            while !stop.load(Ordering::Relaxed) {
                let mut fresh = HttpClient::new(addr);
                let client = if keep_alive { &mut kept } else { &mut fresh };
                match client.get("/", &[]).await {
                    Ok(r) if r.status == 200 => {
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(r) => failures
                        .lock()
                        .unwrap()
                        .push(format!("status {}", r.status)),
                    Err(e) => failures.lock().unwrap().push(e.to_string()),
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }

    // The notifications, each with whether the old process still ran when it came.
    let messages = Arc::new(Mutex::new(Vec::<Message>::new()));
    let listening = Arc::new(AtomicBool::new(true));
    let reader = {
        let (messages, listening) = (messages.clone(), listening.clone());
        std::thread::spawn(move || {
            while listening.load(Ordering::Relaxed) {
                if let Some((pid, text)) = notify.recv() {
                    let watched_alive = running(old);
                    messages.lock().unwrap().push(Message {
                        pid,
                        text,
                        watched_alive,
                    });
                }
            }
            notify
        })
    };

    // Under a service manager --binary is refused: the service starts its own binary.
    let refused = Command::new(tether_bin())
        .args(["upgrade", "--binary", "/bin/true", "-c"])
        .arg(&conf)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("runs under systemd"),
        "{said}"
    );
    assert!(running(old));

    // A new binary that fails before it takes the sockets over: the old process serves on.
    let broken = dir.join("broken");
    std::fs::write(&broken, "#!/bin/sh\nsleep 1\nexit 3\n").unwrap();
    std::fs::set_permissions(&broken, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let switch = |to: &Path| {
        let link = dir.join("tether.new");
        std::os::unix::fs::symlink(to, &link).unwrap();
        std::fs::rename(&link, &unit_path).unwrap();
    };
    switch(&broken);
    let failed = Command::new(tether_bin())
        .args(["upgrade", "-c"])
        .arg(&conf)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&failed.stderr);
    assert!(
        !failed.status.success() && said.contains("exited before it took over"),
        "{said}"
    );
    assert!(said.contains(&format!("pid {old} keeps serving")), "{said}");
    assert!(running(old));
    get_ok(addr).await;
    switch(Path::new(tether_bin()));

    let conf2 = conf.clone();
    let up = tokio::task::spawn_blocking(move || {
        Command::new(tether_bin())
            .args(["upgrade", "-c"])
            .arg(&conf2)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let said = String::from_utf8_lossy(&up.stdout);
    assert!(up.status.success(), "{up:?}\ntether's log:\n{}", log(&dir));
    let new = tether::process::upgrade::read_pid(&pid_file).unwrap();
    assert_ne!(new, old);
    assert!(said.contains(&format!("pid {new} now serves")), "{said}");
    // Started by the old process, as inside the service (it drains for Pingora's 5 s).
    assert!(
        running(old),
        "the old process drains after `tether upgrade` returned"
    );
    assert_eq!(
        parent_of(new),
        Some(old),
        "the old process started the new one"
    );
    assert_eq!(
        std::fs::read_link(format!("/proc/{new}/exe")).unwrap(),
        std::fs::canonicalize(tether_bin()).unwrap(),
        "the binary the unit's path names now"
    );

    wait_exit(&mut old_child, Duration::from_secs(20));
    let after_exit = served.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }
    let served_after = served.load(Ordering::Relaxed) - after_exit;
    assert!(
        failures.lock().unwrap().is_empty(),
        "failed requests: {:?}",
        failures.lock().unwrap()
    );
    assert!(
        served_after > 0,
        "requests served after the old process exited"
    );

    listening.store(false, Ordering::Relaxed);
    let notify = reader.join().unwrap();
    let messages = messages.lock().unwrap().clone();
    let main_pid = messages
        .iter()
        .position(|m| m.pid == new && m.says(&format!("MAINPID={new}")))
        .unwrap_or_else(|| panic!("no MAINPID={new} from pid {new}: {messages:?}"));
    let ready = messages
        .iter()
        .position(|m| m.pid == new && m.says("READY=1"))
        .unwrap_or_else(|| panic!("no READY=1 from pid {new}: {messages:?}"));
    assert!(main_pid <= ready, "MAINPID= first: {messages:?}");
    assert!(
        messages[main_pid].watched_alive && messages[ready].watched_alive,
        "MAINPID= and READY=1 came while the old process ran: {messages:?}"
    );
    assert!(
        !messages.iter().any(|m| m.says("STOPPING=1")),
        "nobody said STOPPING=1 in the upgrade: {messages:?}"
    );

    // The new process stops as the service's: STOPPING=1 from it.
    kill(new, libc::SIGTERM);
    notify.wait_for(new, "STOPPING=1", Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(15);
    while running(new) {
        assert!(Instant::now() < deadline, "pid {new} did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(sims);
}
