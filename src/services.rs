//! Background services over the live state: the admin API and run-time control, health
//! checks, the fleet's shared state, saved partition tables and operators' overrides, the
//! session counter, the gauges read at a scrape, and "why this server".

pub mod admin;
pub mod control;
pub mod explain;
pub mod fleet;
pub mod health;
pub mod live_metrics;
pub mod overrides;
pub mod persist;
pub mod session_counter;
