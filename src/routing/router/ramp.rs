//! Slow start: a server that came back (health recovered, activated,
//! added by a reload) gets a share of new sessions that ramps from 10 % of its weight to all
//! of it over `slow_start`, so a cold JVM is not handed a full share at once. Its own
//! sessions are not affected: only the balancing of new sessions admits it by chance.

use super::ClusterRouter;
use crate::routing::live::ServerLive;
use std::cell::Cell;

/// The share of its weight a server gets at the start of its ramp.
const FIRST_SHARE: f64 = 0.1;

impl ClusterRouter {
    /// The fraction of its weight `live` gets for new sessions at `now` (ms): 1 unless it
    /// came back within `slow_start`.
    pub fn ramp(&self, live: &ServerLive, now: u64) -> f64 {
        let Some(back) = live.back_since().filter(|_| self.slow_start_ms > 0) else {
            return 1.0;
        };
        let into = now.saturating_sub(back);
        if into >= self.slow_start_ms {
            return 1.0;
        }
        FIRST_SHARE + (1.0 - FIRST_SHARE) * into as f64 / self.slow_start_ms as f64
    }

    /// The weight new sessions see now (the live weight, scaled by the ramp).
    pub fn effective_weight(&self, live: &ServerLive, now: u64) -> f64 {
        live.weight() as f64 * self.ramp(live, now)
    }
}

/// Is a ramping server with share `ramp` taken for this new session? By chance, so that
/// over many sessions it gets that fraction of what its weight would give it.
pub(super) fn admits(ramp: f64) -> bool {
    ramp >= 1.0 || chance() < ramp
}

/// A number in [0, 1) from this thread's xorshift generator (no lock, no system call).
pub(super) fn chance() -> f64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let seed = Cell::new(0u8);
            (&seed as *const Cell<u8> as u64) ^ 0x9E37_79B9_7F4A_7C15
        });
    }
    STATE.with(|s| {
        let mut x = s.get().max(1);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chance_is_spread_over_zero_to_one() {
        let n = 100_000;
        let below = (0..n).filter(|_| chance() < 0.25).count();
        assert!((23_000..27_000).contains(&below), "{below}");
        assert!(admits(1.0));
    }
}

#[cfg(test)]
mod coming_back {
    use crate::config::ServerState;
    use crate::routing::ServerLive;

    #[test]
    fn recovering_activating_and_only_those_start_a_ramp() {
        let live = ServerLive::new(ServerState::Active, 1);
        assert_eq!(live.back_since(), None, "at start: no ramp");
        assert!(!live.mark_up());
        assert_eq!(
            live.back_since(),
            None,
            "a response of an up server is no return"
        );
        live.mark_down(5);
        assert!(live.mark_up());
        let recovered = live.back_since().expect("health recovered");
        live.set_state(ServerState::Draining);
        assert_eq!(live.back_since(), Some(recovered), "draining is no return");
        live.override_state(ServerState::Active);
        assert!(live.back_since().unwrap() >= recovered, "activated");
    }
}
