//! Under systemd, the running tether starts the binary that replaces it, on `SIGUSR2` (which
//! `tether upgrade` sends): a process started from an operator's shell runs outside the
//! service (its cgroup, its user, its sandbox), and systemd ignores notifications from it, so
//! only a process started inside the service can become its main process.
//!
//! The new process is the binary at the path this one was started from (`ExecStart=`'s,
//! where a package or `install` puts the new version), with `-u`, the same config file and
//! the same `-d`, and inherits the service's environment (`NOTIFY_SOCKET`) and its stderr
//! (the journal). `tether upgrade` then sends `SIGQUIT` as it does outside systemd.

use async_trait::async_trait;
use log::{error, info, warn};
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};

/// The background service that starts the successor on `SIGUSR2`.
pub struct StartSuccessor {
    binary: PathBuf,
    conf: PathBuf,
    daemon: bool,
    /// A successor is running (or starting): a second one would take its upgrade socket.
    started: Arc<AtomicBool>,
}

/// The path this process was started from, made absolute (before `-d` changes the working
/// directory), symbolic links kept: a link switched to a new version is followed. The
/// executable's own path when started through `PATH`. Read at start: once a new version
/// replaced the file, `/proc/self/exe` names the old one, deleted.
pub fn own_binary() -> Option<PathBuf> {
    let arg0 = PathBuf::from(std::env::args_os().next()?);
    if arg0.components().count() > 1 {
        return std::path::absolute(arg0).ok();
    }
    std::env::current_exe().ok()
}

impl StartSuccessor {
    /// `binary` from [`own_binary`].
    pub fn new(binary: PathBuf, conf: PathBuf, daemon: bool) -> Self {
        StartSuccessor {
            binary,
            conf,
            daemon,
            started: Arc::new(AtomicBool::new(false)),
        }
    }

    fn start_one(&self) {
        if self.started.swap(true, Ordering::AcqRel) {
            warn!("SIGUSR2: a new process is already starting or running; ignored");
            return;
        }
        let mut command = Command::new(&self.binary);
        command.arg("-u");
        if self.daemon {
            command.arg("-d");
        }
        command.arg("-c").arg(&self.conf).stdin(Stdio::null());
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                self.started.store(false, Ordering::Release);
                return error!("SIGUSR2: cannot start {}: {e}", self.binary.display());
            }
        };
        info!(
            "SIGUSR2: started {} -u (pid {}) to take the listening sockets over",
            self.binary.display(),
            child.id()
        );
        // Reaped here if it ends while this process runs (with -d its first process ends
        // as soon as it went to the background); a failed one may be followed by another.
        let started = self.started.clone();
        let daemon = self.daemon;
        let spawned = std::thread::Builder::new()
            .name("tether-successor".into())
            .spawn(move || match child.wait() {
                Ok(status) if status.success() && daemon => {}
                Ok(status) => {
                    warn!("the new process (pid {}) ended: {status}", child.id());
                    started.store(false, Ordering::Release);
                }
                Err(e) => warn!("cannot wait for the new process: {e}"),
            });
        if let Err(e) = spawned {
            warn!("cannot watch the new process: {e}");
        }
    }
}

#[async_trait]
impl BackgroundService for StartSuccessor {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut usr2 = match signal(SignalKind::user_defined2()) {
            Ok(s) => s,
            Err(e) => return warn!("cannot listen for SIGUSR2 (binary upgrades): {e}"),
        };
        loop {
            tokio::select! {
                Some(()) = usr2.recv() => self.start_one(),
                // Once stopping (or handing over), no successor: the handler stays installed,
                // so a late SIGUSR2 is ignored rather than fatal.
                _ = shutdown.changed() => return,
            }
        }
    }
}
