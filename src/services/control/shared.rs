//! The fleet as the operator state sees it: where an operator's change goes, and what the
//! fleet says of a server and of itself in `GET /status`. `crate::services::fleet::Fleet` implements
//! it; the control names no fleet type, so the fleet's sync task, which applies the other
//! instances' changes to the control, is the one layer that looks at both.

use crate::config::ServerState;

pub trait Shared: Send + Sync {
    /// An operator changed a server through this instance: `state` and `weight` are its
    /// run-time values now, or `None` when it went back to the config file's.
    fn server_changed(&self, cluster: &str, server: &str, state: Option<ServerState>, weight: u32);

    /// The fleet's newest change of a server.
    fn server_status(&self, cluster: &str, server: &str) -> Option<serde_json::Value>;

    /// The fleet's own part of `GET /status`.
    fn status(&self) -> serde_json::Value;
}
