//! tether: a sticky-session reverse proxy for Java application servers, built on Pingora.

pub mod access_log;
pub mod admin;
pub mod bind_check;
pub mod client_limits;
pub mod config;
pub mod control;
pub mod demo;
pub mod fast_stop;
pub mod fleet;
pub mod health;
pub mod import;
pub mod lean;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod overrides;
pub mod persist;
pub mod proxy;
pub mod reload;
pub mod routes;
pub mod routing;
pub mod service;
pub mod sim;
pub mod snapshot;
pub mod tls;
pub mod upgrade;
