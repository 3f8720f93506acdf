//! Ejection that keeps sessions: a server whose answers are 5xx
//! `consecutive_5xx` times in a row takes no new session for a while, longer each time it
//! happens again; its own sessions still reach it (mod_jk's error state, Envoy's and
//! HAProxy's ejections drop them all at once). If they keep failing while it is ejected,
//! it is marked down and they fail over as for any down server. A passing health check
//! ends an ejection; never more than `max_ejected_percent` of the servers are ejected.

use super::ClusterRouter;
use log::warn;

impl ClusterRouter {
    /// Server `server` answered `status` (the answer the client got for it; `failed`: tether
    /// answered for it, the server having failed to) at `now` (ms).
    pub fn observe(&self, server: usize, status: u16, failed: bool, now: u64) {
        let Some(o) = &self.outlier else { return };
        let Some(slot) = self.servers.get(server) else {
            return;
        };
        let live = &slot.live;
        let (answers, errors) = live.count_answer(status, failed);
        let why = if answers >= o.consecutive_5xx {
            "answers 5xx"
        } else if errors >= o.consecutive_errors {
            "failures to answer"
        } else {
            return;
        };
        live.reset_5xx();
        let name = &slot.config.name;
        if live.ejected(now) {
            let reason = format!("{why} in a row while ejected ({})", slot.config.address);
            if live.mark_down_because(now, &reason) {
                warn!(
                    "cluster {} server {name} marked down: {reason}; its sessions fail over",
                    self.name
                );
            }
            return;
        }
        let ejected = self.servers.iter().filter(|s| s.live.ejected(now)).count();
        if (ejected + 1) * 100 > self.servers.len() * o.max_ejected_percent as usize {
            warn!(
                "cluster {} server {name}: {why} in a row; not ejected: {ejected} of {} servers are already (max_ejected_percent {})",
                self.name, self.servers.len(), o.max_ejected_percent
            );
            return;
        }
        let length = live.eject(now, o.ejection.as_millis() as u64);
        self.ejections
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        warn!(
            "cluster {} server {name}: {why} in a row: no new sessions for {} s (its own still go to it)",
            self.name,
            length / 1000
        );
    }

    /// Ejections in this cluster since the router was made.
    pub fn ejections(&self) -> u64 {
        self.ejections.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::ServerState;
    use crate::routing::ServerLive;

    #[test]
    fn ejections_grow_to_ten_times_and_end_on_a_passing_check_or_a_clean_spell() {
        let live = ServerLive::new(ServerState::Active, 1);
        assert_eq!(live.count_answer(500, false), (1, 0));
        assert_eq!(live.count_answer(503, false), (2, 0));
        assert_eq!(
            live.count_answer(502, true),
            (0, 1),
            "tether's own, for a failure"
        );
        assert_eq!(live.count_answer(504, true), (0, 2));
        assert_eq!(
            live.count_answer(503, false),
            (3, 0),
            "an answer breaks the failures' row"
        );
        assert_eq!(
            live.count_answer(200, false),
            (0, 0),
            "any other answer breaks both"
        );
        let mut now = 1_000;
        let lengths: Vec<u64> = (0..12)
            .map(|_| {
                let l = live.eject(now, 100);
                now += l + 1;
                l
            })
            .collect();
        assert_eq!(lengths[..3], [100, 200, 300]);
        assert_eq!(lengths[11], 1000, "at most ten times");
        assert!(live.ejected(now - 2));
        live.end_ejection();
        assert!(!live.ejected(now - 2));
        assert_eq!(
            live.eject(now, 100),
            100,
            "a passing check starts the count again"
        );
        let clean = now + 100 + 10 * 100 + 1;
        assert_eq!(
            live.eject(clean, 100),
            100,
            "so does a spell ten times as long"
        );
    }
}
