//! The status report of the admin API (`GET /status`): every server's state, health,
//! weight and counters, run-time changes with what the file says under them, partition
//! tables, and the fleet's view when instances share state.

use super::{state_name, Control};
use crate::routing::Health;

impl Control {
    /// The status report (`GET /status`).
    pub fn status(&self) -> serde_json::Value {
        let snapshot = self.snapshot.load();
        let config = self.config.load();
        let file = |cluster: &str, server: &str| {
            config
                .clusters
                .iter()
                .find(|c| c.name == cluster)
                .and_then(|c| c.servers.iter().find(|s| s.name == server))
                .map(|s| (s.state, s.weight))
        };
        let clusters: Vec<serde_json::Value> = snapshot
            .clusters
            .iter()
            .map(|r| {
                let servers: Vec<serde_json::Value> = r
                    .servers()
                    .iter()
                    .map(|s| {
                        let health = match s.live.health() {
                            Health::Up => "up",
                            Health::Down { .. } => "down",
                        };
                        // A run-time change, with what the file says under it.
                        let overrides = (s.live.is_overridden())
                            .then(|| file(&r.name, &s.config.name))
                            .map(|f| {
                                serde_json::json!({
                                    "file_state": f.map(|(st, _)| state_name(st)),
                                    "file_weight": f.map(|(_, w)| w),
                                })
                            });
                        serde_json::json!({
                            "name": s.config.name,
                            "address": s.config.address.to_string(),
                            "route": s.config.route,
                            "clone_id": s.config.clone_id,
                            "state": state_name(s.live.state()),
                            "health": health,
                            "weight": s.live.weight(),
                            "backup": s.config.backup,
                            "inflight": s.live.inflight(),
                            "requests": s.live.requests(),
                            "failures": s.live.failures(),
                            "runtime_override": overrides,
                            "fleet_change": self.fleet.get().and_then(|f| f.server_status(&r.name, &s.config.name)),
                        })
                    })
                    .collect();
                let table = r.partitions().map(|t| {
                    serde_json::json!({
                        "size": t.len(),
                        "max": t.max(),
                        "learned": t.learned(),
                        "rejected": t.rejected(),
                        "evicted": t.evicted(),
                    })
                });
                serde_json::json!({
                    "name": r.name,
                    "health_checks": r.health_check().is_some(),
                    "servers": servers,
                    "partition_table": table,
                })
            })
            .collect();
        let fleet = self.fleet.get().map(|f| f.status());
        serde_json::json!({ "clusters": clusters, "fleet": fleet })
    }
}
