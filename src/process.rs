//! The process and its lifecycle: the Pingora server built from the config, the checks before
//! it binds, systemd's notifications, reloads, binary upgrades, the stop signals and the end
//! of a stop, the log, and memory given back to the system.

pub mod bind_check;
pub mod fast_stop;
pub mod free_memory;
pub mod logging;
pub mod reload;
pub mod service;
pub mod signals;
pub mod systemd;
pub mod upgrade;
