//! tether: a sticky-session reverse proxy for Java application servers, built on Pingora.

pub mod config;
pub mod demo;
pub mod persist;
pub mod proxy;
pub mod routing;
pub mod service;
pub mod sim;
pub mod snapshot;
