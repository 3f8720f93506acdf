//! The standard `process_*` metrics (CPU, memory, open fds, threads, start time) of the
//! process that is running now.
//!
//! Prometheus's `ProcessCollector` reads `/proc/<pid>` for the pid it was made with, and the
//! default registry makes one the first time it is used: before `tether -d` forks into the
//! daemon, whose parent then exits. Every scrape of a daemon found no such process and
//! exported nothing. This collector makes a new one whenever the pid changed.

use pingora_prometheus::prometheus::core::{Collector, Desc};
use pingora_prometheus::prometheus::process_collector::ProcessCollector;
use pingora_prometheus::prometheus::{self, proto};
use std::sync::Mutex;

pub struct ThisProcess {
    /// For the descriptions only: they are the same for every pid.
    template: ProcessCollector,
    /// The collector of the pid it was made for.
    current: Mutex<(u32, ProcessCollector)>,
}

impl ThisProcess {
    fn new() -> ThisProcess {
        ThisProcess {
            template: ProcessCollector::for_self(),
            current: Mutex::new((std::process::id(), ProcessCollector::for_self())),
        }
    }
}

impl Collector for ThisProcess {
    fn desc(&self) -> Vec<&Desc> {
        self.template.desc()
    }

    fn collect(&self) -> Vec<proto::MetricFamily> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        if current.0 != pid {
            // After a fork: a new collector, whose start time and CPU are the daemon's.
            *current = (pid, ProcessCollector::for_self());
        }
        current.1.collect()
    }
}

/// Puts [`ThisProcess`] in the default registry in place of the collector it made itself.
pub fn register() {
    let registry = prometheus::default_registry();
    // The registry knows collectors by their descriptions: any ProcessCollector's match.
    let _ = registry.unregister(Box::new(ProcessCollector::for_self()));
    if let Err(e) = registry.register(Box::new(ThisProcess::new())) {
        log::warn!("cannot register the process metrics: {e}");
    }
}
