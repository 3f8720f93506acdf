//! tether's HTTP/2 front end (ALPN `h2` on TLS listeners, and h2c): a connection's streams
//! served in the connection's own task over the `h2` crate (`conn.rs`, its bounds in
//! `settings.rs`), each through the request streams' steps (`crate::front::streams`), which
//! take an `h2` stream as any stream (`io.rs`).

mod conn;
mod io;
mod settings;

use crate::front::streams::Streams;

/// The HTTP/2 front end of one listener.
pub struct Http2 {
    streams: Streams,
}

impl Http2 {
    pub fn new(streams: Streams) -> Self {
        Http2 { streams }
    }
}
