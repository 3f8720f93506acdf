//! The fleet's live sessions: every second the sync task merges this instance's
//! sketches of the sessions each server served (the current and the previous minute, those
//! that changed) into the fleet's HyperLogLogs in Redis, and counts each server's live
//! sessions over the minutes of its cluster's `session_timeout` with `PFCOUNT`.

use super::redis_io::{Failure, Redis};
use super::FleetSync;
use crate::routing::{now_ms, wall_minute};

impl FleetSync {
    /// Publishes the sketches and reads the fleet's counts back.
    pub(super) async fn sync_sessions(&self, redis: &mut Redis) -> Result<(), Failure> {
        let snapshot = self.control.snapshot().load_full();
        let keys = &self.fleet.keys;
        let minute = wall_minute(now_ms());
        let unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        for router in snapshot.clusters.iter() {
            let Some(table) = router.live_sessions() else {
                continue;
            };
            let Some(sketch) = table.sketch() else {
                continue;
            };
            sketch.prepare(minute);
            // Minutes a live session may have last been seen in, and a little more: keys
            // expire on their own after that.
            let window = table.timeout_s().div_ceil(60);
            let ttl = (window + 2) * 60;
            for (i, slot) in router.servers().iter().enumerate() {
                let server = &slot.config.name;
                for m in [minute.saturating_sub(1), minute] {
                    if let Some(dense) = sketch.take_dense(i, m) {
                        let key = keys.sessions(&router.name, server, m);
                        let tmp = format!("{key}:tmp:{}", self.fleet.identity.origin);
                        redis.merge_hll(&key, &tmp, &dense, ttl).await?;
                    }
                }
                let window_keys: Vec<String> = (minute.saturating_sub(window)..=minute)
                    .map(|m| keys.sessions(&router.name, server, m))
                    .collect();
                let live = redis.count_hll(&window_keys).await?;
                sketch.set_fleet(i, live, unix_ms);
            }
        }
        Ok(())
    }
}
