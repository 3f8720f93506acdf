//! Reload triggers: SIGHUP, and (when `watch_config` is set) a change of the config file.
//!
//! Both call [`Control::reload`], which builds and validates the new snapshot off the
//! request path and swaps it in; a bad file is reported, counted and changes nothing.

use crate::services::control::Control;
use async_trait::async_trait;
use log::{error, info, warn};
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::signal::unix::{signal, SignalKind};

pub struct Reloader {
    control: Arc<Control>,
    /// The config file and how often to look at it, when watching is on.
    watch: Option<(PathBuf, Duration)>,
}

impl Reloader {
    pub fn new(control: Arc<Control>, watch: Option<(PathBuf, Duration)>) -> Self {
        Reloader { control, watch }
    }

    fn reload(&self, why: &str) {
        match self.control.reload() {
            Ok(report) if report.needs_upgrade.is_empty() => info!("config reloaded ({why})"),
            Ok(report) => warn!(
                "config reloaded ({why}); these changes need a binary upgrade (tether -u) to take effect: {}",
                report.needs_upgrade.join(", ")
            ),
            Err(e) => error!("config reload ({why}) rejected, the running config stays:\n{e}"),
        }
    }
}

/// What identifies a version of the file without reading it.
fn stamp(path: &PathBuf) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

#[async_trait]
impl BackgroundService for Reloader {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut hup = match signal(SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                warn!("cannot listen for SIGHUP: {e}");
                None
            }
        };
        let (path, every) = match &self.watch {
            Some((p, d)) => (Some(p.clone()), *d),
            None => (None, Duration::from_secs(3600)),
        };
        let mut last = path.as_ref().and_then(stamp);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => None } } => {
                    self.reload("SIGHUP");
                }
                _ = tick.tick(), if path.is_some() => {
                    let now = path.as_ref().and_then(stamp);
                    if now.is_some() && now != last {
                        last = now;
                        self.reload("config file changed");
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}
