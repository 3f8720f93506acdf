//! Commands beside running the proxy: those that talk to a running tether through its admin
//! API (`tether drain`, with a small blocking HTTP client), those that read a config file
//! (`tether explain`), and the manual pages made from the command line's definitions
//! (`tether man`).

pub mod admin_client;
pub mod drain;
pub mod explain;
pub mod man;
