//! Commands beside running the proxy: those that talk to a running tether through its admin
//! API (`tether drain`, with a small blocking HTTP client) and those that read a config
//! file (`tether explain`).

pub mod admin_client;
pub mod drain;
pub mod explain;
