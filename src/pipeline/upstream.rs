//! The exchange with a server over HTTP/1, for every front end that carries it out
//! itself: a connection (one this thread kept, or a new one from Pingora's connector,
//! `connect.rs`, `pool.rs`), the server's answer head read while the client is watched
//! (`head.rs`), and its body read as data (`body.rs`); over AJP/1.3, its packets
//! (`ajp.rs`).

pub mod ajp;
mod body;
mod connect;
mod counted;
mod head;
pub mod pool;
pub mod request_head;

pub use body::BodyReader;
pub use connect::{connect, kept, write_all, Connected};
pub use head::{read_head, ServerFields, Watch, MAX_RESPONSE_HEAD};
