//! tether's log: `env_logger` (`RUST_LOG`, default `info`) with Pingora's expected events
//! put at the level they deserve.
//!
//! Pingora logs some normal events as errors and its start and stop in ~30 lines. Those
//! below are re-levelled (to `debug` unless said) by target and message prefix; everything
//! else passes as it is:
//!
//! - "failed to acquire reusable stream": a pooled upstream connection whose idle watcher
//!   still held a reference when it was taken; Pingora drops it and opens a new one. One
//!   extra connect, no failed request (tether counts real failures itself).
//! - "No incoming socket transfer": a process started with `-u` waits for the old one's
//!   sockets and says so every second until `SIGQUIT` arrives; normal during an upgrade.
//! - start and graceful-stop chatter of `pingora_core::server` and `::services`: tether
//!   logs one "listening on" line per listener instead, and Pingora's signal lines stay.

use log::{Level, LevelFilter, Log, Metadata, Record};

/// (target prefix, message prefix, level it is logged at).
const RELEVEL: &[(&str, &str, Level)] = &[
    (
        "pingora_core::connectors",
        "failed to acquire reusable stream",
        Level::Debug,
    ),
    (
        "pingora_core::server::transfer_fd",
        "No incoming socket transfer",
        Level::Debug,
    ),
    (
        "pingora_core::server::bootstrap_services",
        "Bootstrap",
        Level::Debug,
    ),
    ("pingora_core::server", "Starting service", Level::Debug),
    ("pingora_core::server", "Server starting", Level::Debug),
    ("pingora_core::server", "service '", Level::Debug),
    ("pingora_core::server", "Broadcast", Level::Debug),
    (
        "pingora_core::server",
        "Graceful shutdown started",
        Level::Debug,
    ),
    (
        "pingora_core::server",
        "Graceful shutdown: grace period ends",
        Level::Debug,
    ),
    ("pingora_core::server", "Waiting for", Level::Debug),
    ("pingora_core::server", "Service runtime", Level::Debug),
    (
        "pingora_core::services::listening",
        "Shutting down",
        Level::Debug,
    ),
];

struct Hygiene {
    inner: env_logger::Logger,
}

/// The level `record` is logged at.
fn level_of(record: &Record) -> Level {
    let target = record.target();
    if !target.starts_with("pingora") {
        return record.level();
    }
    let rule = RELEVEL.iter().find(|(t, _, _)| target.starts_with(t));
    if rule.is_none() {
        return record.level();
    }
    // Only Pingora's own lines get here, and few of them: formatting is fine.
    let message = match record.args().as_str() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(record.args().to_string()),
    };
    RELEVEL
        .iter()
        .find(|(t, m, _)| target.starts_with(t) && message.starts_with(m))
        .map_or(record.level(), |(_, _, level)| *level)
}

impl Log for Hygiene {
    fn enabled(&self, metadata: &Metadata) -> bool {
        self.inner.enabled(metadata)
    }

    fn log(&self, record: &Record) {
        let level = level_of(record);
        if level == record.level() {
            return self.inner.log(record);
        }
        let moved = Record::builder()
            .level(level)
            .target(record.target())
            .args(*record.args())
            .module_path(record.module_path())
            .file(record.file())
            .line(record.line())
            .build();
        if self.inner.enabled(moved.metadata()) {
            self.inner.log(&moved);
        }
    }

    fn flush(&self) {
        self.inner.flush()
    }
}

/// Installs the logger (once, at start).
pub fn init() {
    let inner =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).build();
    let max: LevelFilter = inner.filter();
    if log::set_boxed_logger(Box::new(Hygiene { inner })).is_ok() {
        log::set_max_level(max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(target: &str, level: Level, message: &str) -> Level {
        level_of(
            &Record::builder()
                .target(target)
                .level(level)
                .args(format_args!("{message}"))
                .build(),
        )
    }

    #[test]
    fn expected_pingora_events_are_relevelled_and_the_rest_is_not() {
        assert_eq!(
            level(
                "pingora_core::connectors",
                Level::Error,
                "failed to acquire reusable stream"
            ),
            Level::Debug
        );
        assert_eq!(
            level(
                "pingora_core::server::transfer_fd",
                Level::Error,
                "No incoming socket transfer, sleep 1s and try again"
            ),
            Level::Debug
        );
        assert_eq!(
            level("pingora_core::connectors", Level::Error, "something else"),
            Level::Error
        );
        assert_eq!(
            level(
                "pingora_core::server",
                Level::Info,
                "SIGTERM received, gracefully exiting"
            ),
            Level::Info
        );
        assert_eq!(
            level(
                "tether::proxy",
                Level::Warn,
                "failed to acquire reusable stream"
            ),
            Level::Warn
        );
    }
}
