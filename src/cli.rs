//! Commands beside running the proxy: the admin API's clients, `tether import`'s printer, the
//! demo, and the simulated application servers the demo and the tests run.

pub mod commands;
pub mod demo;
pub mod sim;
