//! What every layer uses and that uses nothing of tether's: the poll's clock, stable hashes,
//! a rate limit for log lines.

pub mod every;
pub mod poll_time;
pub mod stable_hash;
