//! The signals that stop tether, read in place of Pingora's own watch: `SIGTERM` is a
//! graceful stop and `SIGQUIT` hands the listening sockets to a new process, as Pingora
//! has them; `SIGINT` ends the process at once, here.
//!
//! Pingora's quick stop tears the services' runtimes down while their accept loops still
//! run, and a listener built on one thread of a runtime and accepting on another then
//! spins on its dead reactor ("being shutdown"), logging each failed accept and holding
//! its thread, and so the process, for as long as it likes. A quick stop needs nothing the
//! runtimes hold: it says `STOPPING=1`, keeps what must not be lost (`fast_stop::exit_now`)
//! and exits.

use crate::process::{fast_stop, systemd};
use crate::services::control::Control;
use async_trait::async_trait;
use log::{error, info};
use pingora_core::server::{ShutdownSignal, ShutdownSignalWatch};
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};

pub struct Signals {
    control: Arc<Control>,
}

impl Signals {
    pub fn new(control: Arc<Control>) -> Self {
        Signals { control }
    }
}

#[async_trait]
impl ShutdownSignalWatch for Signals {
    async fn recv(&self) -> ShutdownSignal {
        let (mut upgrade, mut terminate, mut interrupt) = match (
            signal(SignalKind::quit()),
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(q), Ok(t), Ok(i)) => (q, t, i),
            (q, t, i) => {
                let e = [q.err(), t.err(), i.err()].into_iter().flatten().next();
                error!("cannot listen for the stop signals ({e:?}): stopping");
                return ShutdownSignal::FastShutdown;
            }
        };
        tokio::select! {
            _ = upgrade.recv() => ShutdownSignal::GracefulUpgrade,
            _ = terminate.recv() => ShutdownSignal::GracefulTerminate,
            _ = interrupt.recv() => {
                info!("SIGINT received: exiting now");
                systemd::stopping(None);
                fast_stop::exit_now(&self.control)
            }
        }
    }
}
