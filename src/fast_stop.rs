//! `SIGINT` stops tether at once, even while a graceful stop (`SIGTERM`, `SIGQUIT`) is
//! waiting out its grace period.
//!
//! Pingora listens for `SIGINT` only until a shutdown begins; then its main thread sleeps
//! for `grace_period_seconds` and then waits up to `graceful_shutdown_timeout_seconds` for
//! the runtimes, and a `SIGINT` (whose default action its handler replaced) does nothing.
//! Once a graceful stop begins, this service starts a thread of its own (outside the
//! runtimes, which are being shut down) that exits the process on `SIGINT`, after the
//! last save of the partition tables.

use crate::control::Control;
use async_trait::async_trait;
use log::{info, warn};
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::sync::Arc;

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
            .name("tether-sigint".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .build()
                {
                    Ok(r) => r,
                    Err(e) => return warn!("SIGINT during shutdown will not stop at once: {e}"),
                };
                runtime.block_on(async {
                    use tokio::signal::unix::{signal, SignalKind};
                    match signal(SignalKind::interrupt()) {
                        Ok(mut int) => {
                            int.recv().await;
                        }
                        Err(e) => return warn!("cannot listen for SIGINT: {e}"),
                    }
                    info!("SIGINT received during the graceful stop: exiting now");
                    if let Some(dir) = &control.config().state_dir {
                        crate::persist::save_all(control.snapshot(), dir);
                    }
                    crate::upgrade::remove_pid_file(&control.config().server.pid_file);
                    std::process::exit(0);
                });
            });
        if let Err(e) = spawned {
            warn!("SIGINT during shutdown will not stop at once: {e}");
        }
    }
}
