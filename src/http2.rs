//! tether's HTTP/2 front end (ALPN `h2` on TLS listeners, and h2c): a connection's streams
//! served in the connection's own task over the `h2` crate (`conn.rs`, its bounds in
//! `settings.rs`), each stream through the pipeline's steps and tries (`stream.rs`), its
//! exchange with the server over HTTP/1 (`exchange.rs`, on `crate::upstream`), its body
//! read within the listener's limits (`body.rs`), and each answer, the server's or
//! tether's own (`answer.rs`), sent within the client's flow-control window (`send.rs`).

mod answer;
mod body;
mod conn;
mod exchange;
mod send;
mod settings;
mod stream;

pub use conn::{Http2, Link};
