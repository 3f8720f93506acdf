//! `tether upgrade -c FILE`: a zero-downtime binary upgrade in one command.
//!
//! Pingora's upgrade has three steps that must happen in order: start the new binary with
//! `-u` (it waits on `upgrade_sock` for the listening sockets), send SIGQUIT to the old
//! process (it hands its sockets over, stops accepting and drains), then the new process
//! serves. This command does them in that order, checks each, and leaves the new process
//! running in the background (`-d`), writing its pid to `pid_file`. Partition tables and
//! operators' run-time changes reach the new process through `state_dir`.
//!
//! Under systemd the running process starts the new binary itself, inside the service
//! (`upgrade/successor.rs`), when this command asks it with `SIGUSR2`; the rest is the same
//! (`upgrade/in_service.rs`).

mod in_service;
pub mod successor;

use crate::config;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// The pid in a pid file.
pub fn read_pid(pid_file: &Path) -> Result<i32, String> {
    let text = std::fs::read_to_string(pid_file).map_err(|e| {
        format!(
            "cannot read the pid file {}: {e} (is tether running?)",
            pid_file.display()
        )
    })?;
    text.trim()
        .parse()
        .map_err(|_| format!("{} does not hold a pid", pid_file.display()))
}

pub(super) fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Writes this process's pid, for a foreground tether (Pingora writes it in daemon mode).
pub fn write_pid_file(pid_file: &Path) {
    let tmp = pid_file.with_extension("pid.tmp");
    let written = std::fs::write(&tmp, format!("{}\n", std::process::id()))
        .and_then(|()| std::fs::rename(&tmp, pid_file));
    if let Err(e) = written {
        log::warn!("cannot write the pid file {}: {e}", pid_file.display());
    }
}

/// Removes the pid file at exit when it still names this process (after an upgrade it
/// names the new one, which must keep it).
pub fn remove_pid_file(pid_file: &str) {
    let path = Path::new(pid_file);
    if read_pid(path).is_ok_and(|pid| pid as u32 == std::process::id()) {
        if let Err(e) = std::fs::remove_file(path) {
            log::warn!("cannot remove the pid file {pid_file}: {e}");
        }
    }
}

/// Whether the listening sockets `held` include `address` (a socket on the unspecified
/// address holds every address of its port).
pub(super) fn holds(held: &[SocketAddr], address: SocketAddr) -> bool {
    held.iter()
        .any(|h| *h == address || (h.port() == address.port() && h.ip().is_unspecified()))
}

pub(super) fn signal(pid: i32, signal: i32) -> Result<(), String> {
    // SAFETY: kill(2) with a pid read from our own pid file and a valid signal number.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(format!(
            "cannot signal pid {pid}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

pub(super) fn fresh_socket(path: &Path, since: SystemTime) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t >= since)
}

pub fn run(conf: &Path, binary: Option<PathBuf>) -> ExitCode {
    match upgrade(conf, binary) {
        Ok(msg) => {
            println!("{msg}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tether upgrade: {e}");
            ExitCode::FAILURE
        }
    }
}

fn upgrade(conf: &Path, binary: Option<PathBuf>) -> Result<String, String> {
    let conf = conf
        .canonicalize()
        .map_err(|e| format!("{}: {e}", conf.display()))?;
    let config = config::load(&conf).map_err(|e| e.to_string())?;
    let pid_file = PathBuf::from(&config.server.pid_file);
    let sock = PathBuf::from(&config.server.upgrade_sock);
    let old = read_pid(&pid_file)?;
    if !alive(old) {
        return Err(format!(
            "pid {old} (from {}) is not running",
            pid_file.display()
        ));
    }
    // Addresses the running process holds are handed over; any other must be free, or
    // the new process would start without that listener once the old one let go.
    let held = crate::process::bind_check::listening_of(old);
    let addresses = crate::process::bind_check::addresses(&config);
    crate::process::bind_check::check_addresses(&addresses, |a| holds(&held, a))
        .map_err(|e| format!("{e}; nothing was changed, pid {old} keeps serving"))?;
    if in_service::starts_its_successor(old) {
        let addresses: Vec<SocketAddr> = addresses.into_iter().map(|(_, a)| a).collect();
        return in_service::upgrade(&config, old, binary, &addresses);
    }
    // Started from here, the new process would run outside the old one's service.
    if let Some(unit) = in_service::outside_its_service(old) {
        return Err(format!(
            "pid {old} runs in {unit} and cannot start the new binary inside it (an older \
             tether, or a unit without Type=notify): put the new binary in service with \
             `systemctl restart {unit}` (contrib/tether.service); nothing was changed"
        ));
    }
    let binary = match binary {
        Some(b) => b,
        None => std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?,
    };
    let started = SystemTime::now() - Duration::from_secs(1);
    let mut child = Command::new(&binary)
        .args(["-u", "-d", "-c"])
        .arg(&conf)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;

    // 1. The new process is listening on the upgrade socket.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !fresh_socket(&sock, started) {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "the new process exited before taking over ({status})"
            ));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err(format!("the new process never opened {}", sock.display()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // 2. The old process hands its sockets over and drains.
    if let Err(e) = signal(old, libc::SIGQUIT) {
        let _ = child.kill();
        return Err(e);
    }
    // 3. The new process got the sockets and went to the background.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(status)) => {
                return Err(format!("the new process failed to take over ({status})"))
            }
            _ if Instant::now() > deadline => {
                return Err("the new process did not take over in 60 s".into())
            }
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let new = read_pid(&pid_file).unwrap_or(0);
    Ok(format!(
        "upgraded: pid {new} now serves; pid {old} drains for up to {} s and exits",
        config.server.grace_period_seconds + config.server.graceful_shutdown_timeout_seconds
    ))
}
