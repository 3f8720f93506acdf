//! What the mod_jk importer makes of workers for its later steps: the target a mounted
//! worker name stands for, and a balancer member as a server with its routing facts.

use super::doc::Item;

/// What a worker name stands for in a mount.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Cluster(String),
    Status,
}

/// A server and what later steps need of it.
pub struct Member {
    pub item: Item,
    pub route: String,
    /// `redirect` as written (a worker name or route), with its note.
    pub redirect: Option<(String, String)>,
    pub distance: i64,
    /// `worker.X.distance=N` when it was set.
    pub distance_said: Option<String>,
}
