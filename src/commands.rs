//! Commands that talk to a running tether through its admin API (`tether drain`): a small
//! blocking HTTP client, and each command.

pub mod admin_client;
pub mod drain;
