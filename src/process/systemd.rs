//! systemd's notifications (`sd_notify`): under `Type=notify` (contrib/tether.service)
//! tether says which process is the service's main one (`MAINPID=`), that it serves
//! (`READY=1`, once every address it listens on is open) and that it stops (`STOPPING=1`).
//!
//! In a binary upgrade the new process sends `MAINPID=<its pid>` as soon as it runs, before
//! the old one exits (the old keeps accepting for Pingora's 5 s after it handed its sockets
//! over): systemd then follows the new process, and the old one's exit is no longer the end
//! of the service. The old process says nothing more once it handed its sockets over: a
//! `STOPPING=1` from it would stop the service its successor now is.
//!
//! A message is one datagram on the Unix socket named by `$NOTIFY_SOCKET` (a path, or a name
//! in the abstract namespace when it starts with `@`); without the variable nothing is sent.
//! The variable stays set: the process that replaces this one in an upgrade inherits it.
//! Messages go out from a background service, which starts after daemonizing (`-d`), so the
//! pid they carry is the daemon's. `STOPPING=1` goes out from a thread of its own the moment
//! a stop begins: a quick stop (`SIGINT`) tears the services' runtimes down at once, and the
//! rest of the stop may take a while.

use async_trait::async_trait;
use log::warn;
use pingora_core::server::{ExecutionPhase, ShutdownWatch};
use pingora_core::services::background::BackgroundService;
use std::ffi::OsStr;
use std::net::SocketAddr;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

/// The variable systemd sets for a `Type=notify` service.
const SOCKET_VAR: &str = "NOTIFY_SOCKET";

/// How often the listening sockets are looked for before `READY=1`.
const LISTEN_CHECK: Duration = Duration::from_millis(20);

/// Whether a service manager listens for notifications (`$NOTIFY_SOCKET` is set).
pub fn under_service_manager() -> bool {
    std::env::var_os(SOCKET_VAR).is_some_and(|v| !v.is_empty())
}

/// The socket address `$NOTIFY_SOCKET` names: `@name` is in the abstract namespace.
fn socket_address(var: &OsStr) -> std::io::Result<UnixAddr> {
    match var.as_bytes().strip_prefix(b"@") {
        Some(name) => UnixAddr::from_abstract_name(name),
        None if var.as_bytes().starts_with(b"/") => UnixAddr::from_pathname(var),
        None => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{SOCKET_VAR}={} is neither a path nor @name",
                var.to_string_lossy()
            ),
        )),
    }
}

/// Sends `state` (`KEY=value` lines) to the service manager; `Ok(false)` when there is none.
pub fn notify(state: &str) -> std::io::Result<bool> {
    let Some(var) = std::env::var_os(SOCKET_VAR).filter(|v| !v.is_empty()) else {
        return Ok(false);
    };
    let address = socket_address(&var)?;
    UnixDatagram::unbound()?.send_to_addr(state.as_bytes(), &address)?;
    Ok(true)
}

/// [`notify`], with a failure logged: the service keeps running either way (systemd then
/// times the start out, or does not follow an upgrade, and says so in its own log).
fn send(state: &str) {
    if let Err(e) = notify(state) {
        let first = state.lines().next().unwrap_or("");
        warn!("cannot tell systemd {first}: {e}");
    }
}

/// Whether `STOPPING=1` went out: it is said once, by whoever sees the stop first.
static STOPPING_SAID: AtomicBool = AtomicBool::new(false);

/// `STOPPING=1` (with `status`, if any), once.
pub fn stopping(status: Option<&str>) {
    if STOPPING_SAID.swap(true, Ordering::AcqRel) {
        return;
    }
    match status {
        Some(status) => send(&format!("STOPPING=1\nSTATUS={status}")),
        None => send("STOPPING=1"),
    }
}

/// Waits for a stop on a thread, not a runtime's task: `STOPPING=1` when one begins, nothing
/// when the sockets go to a new process (which tells systemd itself).
fn watch_for_the_stop(mut phases: broadcast::Receiver<ExecutionPhase>) {
    loop {
        match phases.blocking_recv() {
            Ok(ExecutionPhase::GracefulTerminate) => {
                return stopping(Some("stopping: serving open connections, accepting none"));
            }
            Ok(ExecutionPhase::ShutdownStarted) => return stopping(None),
            Ok(ExecutionPhase::GracefulUpgradeTransferringFds) | Err(RecvError::Closed) => return,
            Ok(_) | Err(RecvError::Lagged(_)) => {}
        }
    }
}

/// Whether an address tether listens on is among the sockets `held` (a listener on the
/// unspecified address holds every address of its port).
fn held_by(held: &[SocketAddr], address: SocketAddr) -> bool {
    held.iter()
        .any(|h| *h == address || (h.port() == address.port() && h.ip().is_unspecified()))
}

/// Whether process `pid` handles signal `signal` (the `SigCgt` mask of /proc/PID/status).
/// A tether under systemd handles `SIGUSR2` (it starts its successor); to one that does
/// not, the signal would be fatal. Before Pingora waits for its stop signals, `SIGTERM`
/// and `SIGINT` still have their default action: the process would die without its stop.
pub fn catches(pid: i32, signal: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
            u64::from_str_radix(mask.trim(), 16).ok()
        })
        .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
}

/// The background service that sends `MAINPID=`, `READY=1` and, at a graceful stop,
/// `STOPPING=1`. Added only under a service manager.
pub struct Notifier {
    /// Every address the process listens on (listeners, admin API, metrics).
    addresses: Vec<SocketAddr>,
    /// Pingora's phases: a graceful stop, or the hand-over of an upgrade.
    phases: Mutex<Option<broadcast::Receiver<ExecutionPhase>>>,
}

impl Notifier {
    /// `phases` from `Server::watch_execution_phase`, taken before the server runs.
    pub fn new(addresses: Vec<SocketAddr>, phases: broadcast::Receiver<ExecutionPhase>) -> Self {
        Notifier {
            addresses,
            phases: Mutex::new(Some(phases)),
        }
    }

    /// Ready: every address listens, and a stop signal would be handled (Pingora registers
    /// its handlers only once it runs, after the services started).
    fn all_listening(&self, pid: u32) -> bool {
        let stops = [libc::SIGTERM, libc::SIGINT, libc::SIGQUIT];
        if !stops.iter().all(|&s| catches(pid as i32, s)) {
            return false;
        }
        let held = crate::process::bind_check::listening_of(pid as i32);
        self.addresses.iter().all(|a| held_by(&held, *a))
    }
}

#[async_trait]
impl BackgroundService for Notifier {
    async fn start(&self, _shutdown: ShutdownWatch) {
        let pid = std::process::id();
        // At once: in an upgrade the old process may exit as soon as its grace ends.
        send(&format!("MAINPID={pid}"));
        let taken = self.phases.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(mut phases) = taken else { return };
        let stop = phases.resubscribe();
        let watching = std::thread::Builder::new()
            .name("tether-stop-notify".into())
            .spawn(move || watch_for_the_stop(stop));
        if let Err(e) = watching {
            warn!("cannot watch for the stop (STOPPING=1 comes when the run ends): {e}");
        }
        let mut ready = false;
        loop {
            tokio::select! {
                phase = phases.recv() => match phase {
                    // Stopping or handed over: never READY=1 after that.
                    Ok(ExecutionPhase::GracefulTerminate)
                    | Ok(ExecutionPhase::ShutdownStarted)
                    | Ok(ExecutionPhase::GracefulUpgradeTransferringFds)
                    | Err(RecvError::Closed) => return,
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                },
                () = tokio::time::sleep(LISTEN_CHECK), if !ready => {
                    if self.all_listening(pid) {
                        ready = true;
                        let list: Vec<String> = self.addresses.iter().map(|a| a.to_string()).collect();
                        send(&format!("READY=1\nSTATUS=serving on {}", list.join(", ")));
                    }
                }
            }
        }
    }
}

/// After `Server::run` returned (`SIGINT`, or a graceful stop that ran to its end):
/// `STOPPING=1`, unless this process handed its sockets to a new one (`phases`, subscribed
/// before the run, says so).
pub fn after_run(mut phases: broadcast::Receiver<ExecutionPhase>) {
    loop {
        match phases.try_recv() {
            Ok(ExecutionPhase::GracefulUpgradeTransferringFds) => return,
            Ok(_) | Err(TryRecvError::Lagged(_)) => {}
            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
        }
    }
    stopping(None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses() {
        let path = socket_address(OsStr::new("/run/systemd/notify")).unwrap();
        assert_eq!(
            path.as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
        let abstract_ = socket_address(OsStr::new("@/org/freedesktop/systemd1/notify")).unwrap();
        assert_eq!(
            abstract_.as_abstract_name(),
            Some(&b"/org/freedesktop/systemd1/notify"[..])
        );
        assert!(socket_address(OsStr::new("vsock:2:1234")).is_err());
    }

    #[test]
    fn a_listener_on_every_address_holds_its_port() {
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let one: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let other: SocketAddr = "127.0.0.1:8081".parse().unwrap();
        assert!(held_by(&[any], one));
        assert!(held_by(&[one], one));
        assert!(!held_by(&[one], any));
        assert!(!held_by(&[any], other));
    }
}
