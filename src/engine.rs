//! tether's own HTTP/1 engine (issue 24, `listeners[].http1: engine`, being built; see
//! `docs/DESIGN.md` section 10): the listener's HTTP/1 connections served on buffers
//! allocated once per connection, with the request head indexed in place
//! (`crate::http1`), the proxy core's steps run over that view (`crate::proxy`), the
//! upstream head written straight to the wire, and servers reached through Pingora's
//! connector. What it does not take yet (plugins, bodies that are chunked or larger
//! than `request_buffer`, `Expect`, upgrades, `Connection` options, absolute-form
//! targets) goes to pingora-proxy with the bytes already read.

mod answer;
mod conn;
mod exchange;
mod pool;
mod serve;
mod steps;
mod wire;

pub use conn::Conn;
pub use serve::{Engine, Next};
