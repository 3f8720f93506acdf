//! tether: a sticky-session reverse proxy for Java application servers, built on Pingora.
//!
//! The modules are layers, declared from the top down: each uses only those below it
//! (`tests/layers.rs` checks it; `docs/layout.md` names every file). A blank line between
//! them keeps rustfmt from sorting them.

// Commands beside running the proxy, the demo and its simulated servers.
pub mod cli;

// The process and its lifecycle.
pub mod process;

// Background services over the live state.
pub mod services;

// Listeners and front ends.
pub mod front;

// The pipeline: a request's steps, the exchange with a server, files, compression, the
// access log.
pub mod pipeline;

// The live state requests read: the snapshot a reload swaps, TLS, per-client limits.
pub mod state;

// Prometheus metrics.
pub mod metrics;

// The routing decision and the host and path routes.
pub mod routing;

// The configuration, and the importers that write one.
pub mod config;

// Wire formats: HTTP/1, AJP/1.3, content codings.
pub mod wire;

// What every layer uses.
pub mod base;
