//! tether: a sticky-session reverse proxy for Java application servers, built on Pingora.

pub mod config;
pub mod routing;
pub mod sim;
