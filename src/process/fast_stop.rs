//! The end of a graceful stop (`SIGTERM`, `SIGQUIT` for a binary upgrade): the process
//! exits as soon as its last client connection closed (a request in flight, an upgraded
//! connection such as a WebSocket), or at once on `SIGINT`.
//!
//! Pingora listens for `SIGINT` only until a shutdown begins; then its main thread sleeps
//! for `grace_period_seconds` whatever is still open, then drops every task. Once a
//! graceful stop begins, this service starts a thread of its own (outside the runtimes,
//! which are being shut down) that exits the process on `SIGINT`, or when no client
//! connection is left: `grace_period_seconds` is then the longest an open connection is
//! waited for, not a wait every stop makes. Before it exits it saves the partition tables
//! and writes out the access log (`exit_now`, which a `SIGINT` before any stop also takes:
//! `process/signals.rs`).

use crate::services::control::Control;
use async_trait::async_trait;
use log::{info, warn};
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::sync::Arc;

/// How often the open connections are counted during a graceful stop.
const DRAIN_CHECK: std::time::Duration = std::time::Duration::from_millis(50);

pub struct FastStop {
    control: Arc<Control>,
}

impl FastStop {
    pub fn new(control: Arc<Control>) -> Self {
        FastStop { control }
    }
}

#[async_trait]
impl BackgroundService for FastStop {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        if shutdown.changed().await.is_err() {
            return;
        }
        let control = self.control.clone();
        let spawned = std::thread::Builder::new()
            .name("tether-stop".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .enable_time()
                    .build()
                {
                    Ok(r) => r,
                    Err(e) => {
                        return warn!("the graceful stop will wait out its grace period: {e}")
                    }
                };
                runtime.block_on(async {
                    use tokio::signal::unix::{signal, SignalKind};
                    let started = std::time::Instant::now();
                    let mut int = match signal(SignalKind::interrupt()) {
                        Ok(int) => Some(int),
                        Err(e) => {
                            warn!("cannot listen for SIGINT: {e}");
                            None
                        }
                    };
                    let open = crate::front::listener::open_connections();
                    if open > 0 {
                        info!(
                            "graceful stop: open client connections: {open}; each is waited \
                             for up to {} s (grace_period_seconds)",
                            control.config().server.grace_period_seconds
                        );
                    }
                    // Two readings in a row: a connection accepted just before the stop is
                    // counted a moment after its accept.
                    let mut empty = 0;
                    let why = loop {
                        let sigint = async {
                            match &mut int {
                                Some(int) => int.recv().await,
                                None => std::future::pending().await,
                            }
                        };
                        tokio::select! {
                            _ = sigint => break "SIGINT received during the graceful stop",
                            () = tokio::time::sleep(DRAIN_CHECK) => {}
                        }
                        empty = match crate::front::listener::open_connections() {
                            0 => empty + 1,
                            _ => 0,
                        };
                        if empty == 2 {
                            break "graceful stop: no client connection left";
                        }
                    };
                    info!(
                        "{why} after {:.1} s: exiting",
                        started.elapsed().as_secs_f64()
                    );
                    exit_now(&control)
                });
            });
        if let Err(e) = spawned {
            warn!("the graceful stop will wait out its grace period: {e}");
        }
    }
}

/// Ends the process at once, keeping what a stop must not lose: the partition tables (in
/// `state_dir`), the access log's last records, and the pid file's removal. Open connections
/// are cut; nothing waits for the runtimes, whose tasks are simply dropped with the process.
pub fn exit_now(control: &Control) -> ! {
    if let Some(dir) = &control.config().state_dir {
        crate::services::persist::save_all(control.snapshot(), dir);
    }
    crate::pipeline::access_log::flush_all(std::time::Duration::from_secs(1));
    crate::process::upgrade::remove_pid_file(&control.config().server.pid_file);
    std::process::exit(0)
}
