//! tether: a sticky-session reverse proxy for Java application servers, built on Pingora.

pub mod access_log;
pub mod admin;
pub mod config;
pub mod control;
pub mod demo;
pub mod health;
pub mod metrics;
pub mod persist;
pub mod proxy;
pub mod routing;
pub mod service;
pub mod sim;
pub mod snapshot;
