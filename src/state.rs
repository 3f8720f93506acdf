//! The live state requests read: the snapshot a reload swaps whole (each cluster's router,
//! each listener's routes and limits), the listeners' TLS, and the per-client limits.

pub mod client_limits;
pub mod snapshot;
pub mod tls;
