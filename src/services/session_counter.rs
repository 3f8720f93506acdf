//! Counts every cluster's live sessions once a second (a scan of each session table), so
//! that `balance: sessions` reads fresh counts on the request path without scanning.

use crate::state::snapshot::SharedSnapshot;
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::time::Duration;

/// How often the tables are scanned.
pub const EVERY: Duration = Duration::from_secs(1);

pub struct SessionCounter {
    snapshot: SharedSnapshot,
}

impl SessionCounter {
    pub fn new(snapshot: SharedSnapshot) -> Self {
        SessionCounter { snapshot }
    }
}

#[async_trait]
impl BackgroundService for SessionCounter {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let snapshot = self.snapshot.load();
                    for router in snapshot.clusters.iter().filter(|r| r.balances_by_sessions()) {
                        if let Some(t) = router.live_sessions() {
                            t.scan();
                        }
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}
