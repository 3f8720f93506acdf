//! What a new operator runs into: daemon mode and upgrades keep the access log, the pid
//! file goes with the process, a listener that cannot bind stops the start with one line,
//! and SIGINT stops at once even during a graceful stop.

mod common;

use common::daemon::KillOnDrop;
use common::{free_port, scratch_dir, server_line, tether_bin, tomcats};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tether::cli::sim::{HttpClient, TomcatSim};

fn config(dir: &Path, addr: SocketAddr, sims: &[TomcatSim], server_extra: &str) -> PathBuf {
    let d = dir.display();
    let mut y = format!(
        "server:\n  threads: 2\n  grace_period_seconds: 0\n  graceful_shutdown_timeout_seconds: 1\n  \
         pid_file: {d}/tether.pid\n  upgrade_sock: {d}/upgrade.sock\n{server_extra}\
         access_log:\n  path: {d}/access.log\n\
         listeners:\n  - {{ name: web, address: \"{addr}\", cluster: shop }}\n\
         clusters:\n  - name: shop\n    servers:\n"
    );
    for s in sims {
        y.push_str(&server_line(s, ""));
    }
    let file = dir.join("tether.yaml");
    std::fs::write(&file, y).unwrap();
    file
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn log_lines(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("access.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

async fn get_n(addr: SocketAddr, n: usize) {
    let mut c = HttpClient::new(addr);
    for _ in 0..n {
        assert_eq!(
            c.get("/;jsessionid=SECRET.tc1", &[]).await.unwrap().status,
            200
        );
    }
}

/// Scrapes `metrics`: every standard `process_*` family is there, and its figures are those
/// of the process `pid` (threads, open fds). Returns `process_start_time_seconds`.
async fn process_metrics(metrics: SocketAddr, pid: i32) -> f64 {
    let resp = HttpClient::new(metrics).get("/metrics", &[]).await.unwrap();
    let text = resp.body_str().to_string();
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in the scrape of pid {pid}:\n{text}"))
    };
    for family in [
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
        "process_virtual_memory_bytes",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "process_threads",
    ] {
        value(family);
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let threads: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    // Threads come and go a little between the scrape and the read of /proc.
    let scraped = value("process_threads");
    assert!(
        (scraped - threads).abs() <= 2.0,
        "process_threads {scraped} is pid {pid}'s ({threads})"
    );
    value("process_start_time_seconds")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_and_upgrade_keep_the_access_log_and_the_pid_file_goes_with_the_process() {
    let sims = tomcats(1).await;
    let dir = scratch_dir("daemon");
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let conf = config(
        &dir,
        addr,
        &sims,
        &format!("metrics:\n  address: \"{metrics}\"\n"),
    );
    let pid_file = dir.join("tether.pid");
    let _guard = KillOnDrop(pid_file.clone());
    let out = Command::new(tether_bin())
        .args(["-d", "-c"])
        .arg(&conf)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    let log_file = dir.join("tether.log");
    assert!(
        said.contains(&format!("logs go to {}", log_file.display())),
        "{said}"
    );
    wait_until("the daemon to listen", Duration::from_secs(10), || {
        std::net::TcpStream::connect(addr).is_ok()
    });
    get_n(addr, 5).await;
    wait_until(
        "5 access log lines (daemon)",
        Duration::from_secs(5),
        || log_lines(&dir) >= 5,
    );
    let text = std::fs::read_to_string(dir.join("access.log")).unwrap();
    assert!(!text.contains("SECRET"), "session ids are masked:\n{text}");
    assert!(text.contains("jsessionid=***.tc1"), "{text}");

    let old = tether::process::upgrade::read_pid(&pid_file).unwrap();
    // The daemon's own process metrics (none were exported after -d).
    let daemon_started = process_metrics(metrics, old).await;
    // An upgrade to a config with a listener on a taken address fails before anything
    // changes, with one line; the running process keeps serving.
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let good = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(
        &conf,
        good.replace(
            "clusters:\n",
            &format!(
                "  - {{ name: web2, address: \"{}\", cluster: shop }}\nclusters:\n",
                held.local_addr().unwrap()
            ),
        ),
    )
    .unwrap();
    let up = Command::new(tether_bin())
        .args(["upgrade", "-c"])
        .arg(&conf)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!up.status.success());
    let said = String::from_utf8_lossy(&up.stderr);
    assert!(
        said.contains(&format!(
            "cannot listen on {} (listener web2)",
            held.local_addr().unwrap()
        )),
        "{said}"
    );
    assert_eq!(tether::process::upgrade::read_pid(&pid_file).unwrap(), old);
    assert!(alive(old));
    std::fs::write(&conf, good).unwrap();
    drop(held);

    // Through an upgrade: the new process writes the log too.
    let up = Command::new(tether_bin())
        .args(["upgrade", "-c"])
        .arg(&conf)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(up.status.success(), "{up:?}");
    let new = tether::process::upgrade::read_pid(&pid_file).unwrap();
    assert_ne!(old, new);
    wait_until("the old process to exit", Duration::from_secs(15), || {
        !alive(old)
    });
    assert!(
        pid_file.exists(),
        "the old process left the new one's pid file alone"
    );
    let upgraded_started = process_metrics(metrics, new).await;
    assert!(
        upgraded_started > daemon_started,
        "the upgraded process's own start time: {upgraded_started} after {daemon_started}"
    );
    get_n(addr, 5).await;
    wait_until(
        "10 access log lines (upgraded)",
        Duration::from_secs(5),
        || log_lines(&dir) >= 10,
    );
    // The daemon's own log went to the file it announced.
    assert!(
        std::fs::read_to_string(&log_file)
            .unwrap_or_default()
            .contains("listening"),
        "{}",
        std::fs::read_to_string(&log_file).unwrap_or_default()
    );

    // A graceful stop removes the pid file.
    Command::new("kill")
        .args(["-TERM", &new.to_string()])
        .status()
        .unwrap();
    wait_until("the new process to exit", Duration::from_secs(15), || {
        !alive(new)
    });
    assert!(!pid_file.exists(), "pid file removed at exit");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_that_cannot_bind_is_one_line_and_a_failed_start() {
    let sims = tomcats(1).await;
    let dir = scratch_dir("bind");
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap();
    let conf = config(&dir, addr, &sims, "");
    let start = Instant::now();
    let out = Command::new(tether_bin())
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on {addr} (listener web)")),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(start.elapsed() < Duration::from_secs(10), "no 30 retries");
    drop(held);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_stops_at_once_during_the_grace_period() {
    let sims = tomcats(1).await;
    let dir = scratch_dir("sigint");
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let conf = config(&dir, addr, &sims, "");
    // The longest grace period the config allows.
    let text = std::fs::read_to_string(&conf)
        .unwrap()
        .replace("grace_period_seconds: 0", "grace_period_seconds: 3600");
    std::fs::write(&conf, text).unwrap();
    let mut child = Command::new(tether_bin())
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("tether to listen", Duration::from_secs(10), || {
        std::net::TcpStream::connect(addr).is_ok()
    });
    // A request in flight (its body still coming): the graceful stop waits for it.
    let mut open = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(
        &mut open,
        b"POST / HTTP/1.1\r\nHost: shop\r\nContent-Length: 100\r\n\r\nabc",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "in its grace period");
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let start = Instant::now();
    let mut exited = false;
    while start.elapsed() < Duration::from_secs(5) {
        if child.try_wait().unwrap().is_some() {
            exited = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(
        exited,
        "SIGINT during the grace period stops tether at once"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_says_what_matters_once() {
    let sims = tomcats(2).await;
    let dir = scratch_dir("log-hygiene");
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let conf = config(&dir, addr, &sims, "");
    let log_file = dir.join("stderr.log");
    let mut child = Command::new(tether_bin())
        .arg("-c")
        .arg(&conf)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&log_file).unwrap())
        .spawn()
        .unwrap();
    wait_until("tether to listen", Duration::from_secs(10), || {
        std::net::TcpStream::connect(addr).is_ok()
    });
    // Both servers die: failover, then 503 refusals, all expected.
    sims[0].stop().await;
    sims[1].stop().await;
    let mut c = HttpClient::new(addr);
    for _ in 0..5 {
        assert_eq!(c.get("/", &[]).await.unwrap().status, 503);
    }
    let pid = child.id().to_string();
    let before_stop = std::fs::read_to_string(&log_file).unwrap().lines().count();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let _ = child.wait();
    let log = std::fs::read_to_string(&log_file).unwrap();
    assert_eq!(
        log.matches("listening on").count(),
        1,
        "one line per listener:\n{log}"
    );
    assert!(
        !log.contains(" ERROR "),
        "no ERROR for expected events:\n{log}"
    );
    // The refusals are said at warning level, not once per request.
    let refusals = log.matches("request refused with 503").count();
    assert!(
        (1..=2).contains(&refusals),
        "5 refusals, {refusals} lines:\n{log}"
    );
    assert_eq!(
        log.matches("marked down").count(),
        2,
        "each server's fall said once:\n{log}"
    );
    let stop_lines = log.lines().count() - before_stop;
    assert!(stop_lines <= 5, "a graceful stop in a few lines:\n{log}");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigusr1_reopens_the_access_log_after_logrotate_moved_it() {
    let sims = tomcats(1).await;
    let dir = scratch_dir("reopen");
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let conf = config(&dir, addr, &sims, "");
    let mut child = Command::new(tether_bin())
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("tether to listen", Duration::from_secs(10), || {
        std::net::TcpStream::connect(addr).is_ok()
    });
    get_n(addr, 2).await;
    wait_until("2 lines", Duration::from_secs(5), || log_lines(&dir) >= 2);
    std::fs::rename(dir.join("access.log"), dir.join("access.log.1")).unwrap();
    let pid = child.id().to_string();
    Command::new("kill").args(["-USR1", &pid]).status().unwrap();
    // The reopen is asynchronous: requests until the new file has a line.
    let deadline = Instant::now() + Duration::from_secs(5);
    while log_lines(&dir) == 0 {
        assert!(Instant::now() < deadline, "no line in the reopened file");
        get_n(addr, 1).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGUSR1 did not stop tether"
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
}

/// logrotate's postrotate sends SIGUSR1 whether or not an access log is configured: without
/// one, tether ignores it and goes on serving (the signal's default action would end it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigusr1_without_an_access_log_changes_nothing() {
    let sims = tomcats(1).await;
    let mut t = common::Tether::start(&common::cluster_yaml("", &sims));
    let pid = t.pid().to_string();
    assert!(Command::new("kill")
        .args(["-USR1", &pid])
        .status()
        .unwrap()
        .success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(t.alive(), "SIGUSR1 ended tether: {}", t.log());
    let resp = t.client().get("/", &[]).await.unwrap();
    assert_eq!(resp.status, 200);
}
