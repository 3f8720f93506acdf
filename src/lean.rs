//! The lean HTTP/1.1 path (issue 17, an experiment: `listeners[].http1: lean`).
//!
//! pingora-proxy runs each request through a state machine built for caching, HTTP/2 and
//! custom protocols: two tasks joined by channels, boxed phase futures moved around, the
//! request head cloned again. For a plain HTTP/1.1 request whose body is empty or already
//! buffered, none of that is needed. This path calls the very same `TetherProxy` phases, in
//! pingora-proxy's order, around a sequential exchange on pingora-core's HTTP/1 sessions,
//! connector and pool: write the head and body, read the answer, relay it.
//!
//! Requests it does not take (upgrades, `Expect`, chunked or large bodies, absolute-form
//! targets, `Connection` options, no single `Host`) are handed to pingora-proxy with the
//! bytes already read replayed, and the connection stays there (`serve::Served::Handover`).

mod eligible;
mod exchange;
mod serve;

pub use serve::{Lean, Served};
