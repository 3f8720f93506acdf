//! tether's own HTTP/1 engine (the default for HTTP/1, `listeners[].http1: proxy`
//! opts out; `docs/DESIGN.md` section 10): the listener's HTTP/1 connections served on buffers
//! allocated once per connection, with the request head indexed in place
//! (`crate::wire::http1`), the proxy core's steps run over that view (`crate::front::proxy`), the
//! upstream head written straight to the wire, and servers reached through Pingora's
//! connector; a body larger than `request_buffer`, or chunked, streams to the server after
//! its first part (`upload.rs`); routing plugins run over a `RequestHeader` built for
//! them (`plugins.rs`). What it does not take yet (plugins that change messages, an `Expect`
//! other than `100-continue`, upgrades, `CONNECT`, `OPTIONS *`, an absolute-form target
//! without `Host` or with userinfo) goes to pingora-proxy with the bytes already read.

mod ajp;
mod answer;
mod conn;
mod exchange;
mod files;
mod grace;
mod idle;
mod plugins;
mod relay;
mod serve;
mod squeeze;
mod steps;
mod tunnel;
mod upload;
mod wire;

pub use conn::{Conn, IdleConn, IDLE_READ};
pub use grace::waiting as waiting_with_buffers;
pub use idle::{Held, Woke};
pub use serve::{Engine, Grace, Next, IDLE_GRACE};
