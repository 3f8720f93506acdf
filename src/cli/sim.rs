//! Test doubles for tether: Tomcat-like and WebSphere-like application servers and a tiny
//! HTTP/1.1 client.
//!
//! Integration tests and the demo put `TomcatSim` instances behind the proxy and talk to
//! the proxy with `HttpClient`; both speak just enough HTTP/1.1 to exercise stickiness,
//! keep-alive and failover without pulling an HTTP stack into the test build.

pub mod client;
mod response;
mod server;
mod session;
pub mod tomcat;
pub mod websphere;
mod wire;

pub use client::{send_raw, HttpClient, Response};
pub use tomcat::TomcatSim;
pub use websphere::{WasCluster, WebSphereSim};

#[cfg(test)]
mod tests;
