//! A server's live sessions for the admin API: what `GET .../sessions` shows
//! and what a drain that waits watches, read by a scan of its cluster's session table.

use super::{Control, ControlError};
use crate::config::ServerState;
use std::time::Duration;

/// One server's sessions now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionsNow {
    pub state: ServerState,
    pub live: u64,
    /// Seconds until its last live session expires if no request comes.
    pub empty_in_s: u64,
    /// Does the table know every live session (watched a whole timeout, nothing evicted)?
    pub knows_all: bool,
}

impl Control {
    /// `cluster/server`'s live sessions; `None` when the cluster does not count them
    /// (not sticky, or `session_table_max: 0`).
    pub fn sessions_now(
        &self,
        cluster: &str,
        server: &str,
    ) -> Result<Option<SessionsNow>, ControlError> {
        self.in_cluster(cluster, server, |router, index| {
            let state = router.servers()[index].live.state();
            router.live_sessions().map(|t| {
                let counts = t.scan().get(index).copied().unwrap_or_default();
                // In a fleet, the fleet's count (sessions other instances served too).
                let fleet = t.sketch().and_then(|s| s.fleet(index)).map_or(0, |f| f.0);
                SessionsNow {
                    state,
                    live: counts.live.max(fleet),
                    empty_in_s: counts.empty_in_s,
                    knows_all: t.knows_all(t.now()),
                }
            })
        })
    }

    /// Waits until `cluster/server` has no live session, checking every `every`, for at
    /// most `limit`: the last look, and whether it is empty.
    pub async fn wait_empty(
        &self,
        cluster: &str,
        server: &str,
        limit: Duration,
        every: Duration,
    ) -> Result<(Option<SessionsNow>, bool), ControlError> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let now = self.sessions_now(cluster, server)?;
            let Some(s) = now else {
                return Ok((None, false));
            };
            // No session seen is not yet no session: after a start, or an eviction, the
            // table has not watched a whole timeout and a session it never saw may be live.
            if s.live == 0 && s.knows_all {
                return Ok((now, true));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok((now, false));
            }
            let next = (tokio::time::Instant::now() + every).min(deadline);
            tokio::time::sleep_until(next).await;
        }
    }
}
