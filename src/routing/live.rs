//! Live state of one server: administrative state, health, weight and counters, all atomics.
//!
//! Shared by the request path (reads, counter bumps) and by whatever changes state (connect
//! failures now; health checks and the admin API later). No locks.

use crate::config::ServerState;
use arc_swap::ArcSwapOption;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;

/// Health as the router sees it at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    Up,
    /// Marked down; `since` is the [`super::now_ms`] of the mark.
    Down {
        since: u64,
    },
}

#[derive(Debug)]
pub struct ServerLive {
    state: AtomicU8,
    /// 0 when up, else `now_ms() + 1` of the last failure (or of the last probe let through).
    down_since: AtomicU64,
    weight: AtomicU32,
    inflight: AtomicU64,
    /// The most requests in flight at once since the start (or the last `reset`).
    peak: AtomicU64,
    requests: AtomicU64,
    failures: AtomicU64,
    /// Requests tether answered for the server (it failed them), and of those the ones
    /// it did not answer in `read_timeout` (jkstatus's errors and reply timeouts).
    errors: AtomicU64,
    reply_timeouts: AtomicU64,
    /// Bytes to and from the server since the start, and what they were at `reset`.
    bytes: Arc<Bytes>,
    bytes_at_reset: [AtomicU64; 2],
    /// State or weight was changed at run time (admin API): a reload keeps them.
    runtime_override: AtomicBool,
    /// `now_ms() + 1` when the server last came back (health recovered, activated, added
    /// by a reload), for `slow_start`; 0 when it has not.
    back_since: AtomicU64,
    /// Answers 5xx in a row (`outlier`).
    fails_5xx: AtomicU32,
    /// Failures to answer in a row: tether's own 502/504 for it (`outlier`).
    fails_errors: AtomicU32,
    /// `now_ms() + 1` until which the server takes no new session (`outlier`); 0: never was.
    ejected_until: AtomicU64,
    /// Ejections in a row, for their growing length.
    ejections: AtomicU32,
    /// The last active health check's result (health checks, for `/status`).
    last_check: ArcSwapOption<CheckResult>,
    /// Why the server was last marked down, for people (`crate::pipeline::reason`).
    down_reason: ArcSwapOption<String>,
    /// `max_inflight` and the queue of requests waiting for a slot.
    slots: Arc<super::Slots>,
}

/// Bytes a server's connections carried each way, counted by the connections themselves
/// (`upstream::Counted`); never reset (Prometheus's counters never go back).
#[derive(Debug, Default)]
pub struct Bytes {
    pub to_server: AtomicU64,
    pub from_server: AtomicU64,
}

impl Bytes {
    /// `[to the server, from the server]`.
    pub fn now(&self) -> [u64; 2] {
        [self.to_server.load(Relaxed), self.from_server.load(Relaxed)]
    }
}

/// One active health check's result.
#[derive(Debug)]
pub struct CheckResult {
    /// When it ended, in ms since the Unix epoch.
    pub at_ms: u64,
    /// Why it failed; `None` when it passed.
    pub failure: Option<String>,
}

/// `down_since` of a server held down: no `now + recover_after` ever reaches it.
const HELD: u64 = u64::MAX;

fn encode(state: ServerState) -> u8 {
    match state {
        ServerState::Active => 0,
        ServerState::Draining => 1,
        ServerState::Stopped => 2,
    }
}

fn decode(v: u8) -> ServerState {
    match v {
        0 => ServerState::Active,
        1 => ServerState::Draining,
        _ => ServerState::Stopped,
    }
}

impl ServerLive {
    /// Records an active health check's result.
    pub fn checked(&self, failure: Option<String>) {
        let at_ms = super::wall_ms();
        self.last_check
            .store(Some(Arc::new(CheckResult { at_ms, failure })));
    }

    /// The last active health check's result, if one ran.
    pub fn last_check(&self) -> Option<Arc<CheckResult>> {
        self.last_check.load_full()
    }

    pub fn new(state: ServerState, weight: u32) -> Self {
        ServerLive {
            state: AtomicU8::new(encode(state)),
            down_since: AtomicU64::new(0),
            weight: AtomicU32::new(weight),
            inflight: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            reply_timeouts: AtomicU64::new(0),
            bytes: Arc::default(),
            bytes_at_reset: Default::default(),
            runtime_override: AtomicBool::new(false),
            back_since: AtomicU64::new(0),
            fails_5xx: AtomicU32::new(0),
            fails_errors: AtomicU32::new(0),
            ejected_until: AtomicU64::new(0),
            ejections: AtomicU32::new(0),
            slots: super::Slots::new(0),
            last_check: ArcSwapOption::empty(),
            down_reason: ArcSwapOption::empty(),
        }
    }

    /// Counts an answer: the 5xx answers in a row so far (0 after any other), and the
    /// failures to answer in a row (`failed`: tether answered for it; 0 after an answer).
    pub fn count_answer(&self, status: u16, failed: bool) -> (u32, u32) {
        let clear = |c: &AtomicU32| {
            // Written only when there is something to clear: most answers touch nothing.
            if c.load(Relaxed) != 0 {
                c.store(0, Relaxed);
            }
        };
        if failed {
            return (0, self.fails_errors.fetch_add(1, Relaxed) + 1);
        }
        clear(&self.fails_errors);
        if status >= 500 {
            return (self.fails_5xx.fetch_add(1, Relaxed) + 1, 0);
        }
        clear(&self.fails_5xx);
        (0, 0)
    }

    /// Starts counting failures in a row again.
    pub fn reset_5xx(&self) {
        self.fails_5xx.store(0, Relaxed);
        self.fails_errors.store(0, Relaxed);
    }

    /// Is the server ejected from new sessions at `now` (ms)?
    pub fn ejected(&self, now: u64) -> bool {
        let until = self.ejected_until.load(Relaxed);
        until != 0 && now < until - 1
    }

    /// Ejects the server from new sessions from `now` for `base` times the ejections in a
    /// row (at most ten); a server that stayed clear for ten times `base` starts again at
    /// once. The length it got.
    pub fn eject(&self, now: u64, base: u64) -> u64 {
        let until = self.ejected_until.load(Relaxed);
        if until != 0 && now > (until - 1).saturating_add(10 * base) {
            self.ejections.store(0, Relaxed);
        }
        let times = (self.ejections.fetch_add(1, Relaxed) + 1).min(10) as u64;
        let length = base * times;
        self.ejected_until.store(now + length + 1, Relaxed);
        length
    }

    /// Ends an ejection (a passing health check), and its count.
    pub fn end_ejection(&self) {
        if self.ejected_until.load(Relaxed) != 0 {
            self.ejected_until.store(0, Relaxed);
            self.ejections.store(0, Relaxed);
        }
    }

    /// When the ejection ends (ms), while one lasts at `now`.
    pub fn ejected_until(&self, now: u64) -> Option<u64> {
        self.ejected(now)
            .then(|| self.ejected_until.load(Relaxed) - 1)
    }

    /// The server came back at `now` (ms): `slow_start` ramps its share from here.
    pub fn came_back(&self, now: u64) {
        self.back_since.store(now + 1, Relaxed);
    }

    /// When the server last came back (ms), if it has.
    pub fn back_since(&self) -> Option<u64> {
        match self.back_since.load(Relaxed) {
            0 => None,
            t => Some(t - 1),
        }
    }

    pub fn state(&self) -> ServerState {
        decode(self.state.load(Relaxed))
    }

    pub fn set_state(&self, state: ServerState) {
        let before = decode(self.state.swap(encode(state), Relaxed));
        if state == ServerState::Active && before != ServerState::Active {
            self.came_back(super::now_ms());
        }
    }

    pub fn weight(&self) -> u32 {
        self.weight.load(Relaxed)
    }

    /// An operator's change at run time; kept across reloads.
    pub fn override_state(&self, state: ServerState) {
        self.runtime_override.store(true, Relaxed);
        self.set_state(state);
    }

    /// An operator's weight change at run time; kept across reloads.
    pub fn override_weight(&self, weight: u32) {
        self.runtime_override.store(true, Relaxed);
        self.weight.store(weight, Relaxed);
    }

    /// Forgets the operator's change: the next `apply_config` takes the file's values.
    pub fn clear_override(&self) {
        self.runtime_override.store(false, Relaxed);
    }

    pub fn is_overridden(&self) -> bool {
        self.runtime_override.load(Relaxed)
    }

    /// Takes the config's state and weight, unless an operator changed them at run time.
    pub fn apply_config(&self, state: ServerState, weight: u32) {
        if !self.is_overridden() {
            self.set_state(state);
            self.weight.store(weight, Relaxed);
        }
    }

    /// Its bound on requests in flight from this instance, and their queue.
    pub fn slots(&self) -> &Arc<super::Slots> {
        &self.slots
    }

    pub fn health(&self) -> Health {
        match self.down_since.load(Relaxed) {
            0 => Health::Up,
            t => Health::Down { since: t - 1 },
        }
    }

    /// A server added by a reload in a health-checked cluster: down until its checks pass.
    pub fn start_down(&self, now: u64) {
        self.down_since.store(now + 1, Relaxed);
    }

    /// Marks the server down at `now`; true when it was up before (log the transition once).
    pub fn mark_down(&self, now: u64) -> bool {
        self.failures.fetch_add(1, Relaxed);
        self.down_since.swap(now + 1, Relaxed) == 0
    }

    /// Marks the server down for `why` (a sentence for people, kept while it is down);
    /// true when it was up before.
    pub fn mark_down_because(&self, now: u64, why: &str) -> bool {
        let marked = self.mark_down(now);
        if marked {
            self.down_reason.store(Some(Arc::new(why.to_string())));
        }
        marked
    }

    /// Says why a server that is down stays down (its checks still fail, for `why`).
    pub fn still_down_because(&self, why: &str) {
        if self.down_since.load(Relaxed) == 0 {
            return;
        }
        if self.down_reason.load().as_deref().map(String::as_str) != Some(why) {
            self.down_reason.store(Some(Arc::new(why.to_string())));
        }
    }

    /// Why the server is down, when it is and tether knows.
    pub fn down_reason(&self) -> Option<Arc<String>> {
        match self.down_since.load(Relaxed) {
            0 => None,
            _ => self.down_reason.load_full(),
        }
    }

    /// Holds the server down for `why` (its name does not resolve): unlike a mark from
    /// failures, no request is let through as a probe after `recover_after`.
    pub fn hold_down(&self, why: &str) {
        self.down_since.store(HELD, Relaxed);
        if self.down_reason.load().as_deref().map(String::as_str) != Some(why) {
            self.down_reason.store(Some(Arc::new(why.to_string())));
        }
    }

    /// Is the server held down ([`Self::hold_down`])?
    pub fn held(&self) -> bool {
        self.down_since.load(Relaxed) == HELD
    }

    /// Marks the server up; true when it was down before.
    pub fn mark_up(&self) -> bool {
        let was_down = self.down_since.swap(0, Relaxed) != 0;
        if was_down {
            self.came_back(super::now_ms());
        }
        was_down
    }

    /// Is the server usable at `now`? A down server whose `recover_after` has passed lets
    /// exactly one request through as a probe: the caller that wins the claim gets `true`
    /// and restarts the timer, so other requests keep avoiding it until the probe answers.
    pub fn available(&self, now: u64, recover_after_ms: u64) -> bool {
        let marked = self.down_since.load(Relaxed);
        if marked == 0 {
            return true;
        }
        if now + 1 < marked.saturating_add(recover_after_ms) {
            return false;
        }
        self.down_since
            .compare_exchange(marked, now + 1, Relaxed, Relaxed)
            .is_ok()
    }

    /// Like [`Self::available`], without claiming the probe.
    pub fn could_take(&self, now: u64, recover_after_ms: u64) -> bool {
        let marked = self.down_since.load(Relaxed);
        marked == 0 || now + 1 >= marked.saturating_add(recover_after_ms)
    }

    /// Counts a request sent to this server and returns nothing to undo but [`Self::done`].
    pub fn start(&self) {
        let now = self.inflight.fetch_add(1, Relaxed) + 1;
        // A plain load first: a new peak is rare, and a read shares the cache line.
        if now > self.peak.load(Relaxed) {
            self.peak.fetch_max(now, Relaxed);
        }
        self.requests.fetch_add(1, Relaxed);
    }

    /// tether answered a request for the server, which failed it (`timeout`: no answer in
    /// `read_timeout`).
    pub fn failed_request(&self, timeout: bool) {
        self.errors.fetch_add(1, Relaxed);
        if timeout {
            self.reply_timeouts.fetch_add(1, Relaxed);
        }
    }

    /// The status worker's `reset`: the counters read on `/status` start again from 0, and
    /// the peak from what is in flight now.
    pub fn reset_counters(&self) {
        for c in [
            &self.requests,
            &self.failures,
            &self.errors,
            &self.reply_timeouts,
        ] {
            c.store(0, Relaxed);
        }
        self.peak.store(self.inflight(), Relaxed);
        for (at, now) in self.bytes_at_reset.iter().zip(self.bytes.now()) {
            at.store(now, Relaxed);
        }
    }

    /// The counters of the server's connections' bytes.
    pub fn bytes(&self) -> &Arc<Bytes> {
        &self.bytes
    }

    /// `[to the server, from the server]` since the start or the last `reset`.
    pub fn bytes_since_reset(&self) -> [u64; 2] {
        let now = self.bytes.now();
        [0, 1].map(|i| now[i].saturating_sub(self.bytes_at_reset[i].load(Relaxed)))
    }

    /// The status worker's `recover`: a server marked down (by failures, or ejected as an
    /// outlier) takes requests again now; true when it was down or ejected.
    pub fn recover(&self) -> bool {
        // A name with no address stays held: there is nothing to send to.
        if self.held() {
            return false;
        }
        let ejected = self.ejected(super::now_ms());
        self.end_ejection();
        let was_down = self.mark_up();
        self.reset_5xx();
        was_down || ejected
    }

    pub fn peak(&self) -> u64 {
        self.peak.load(Relaxed)
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Relaxed)
    }

    pub fn reply_timeouts(&self) -> u64 {
        self.reply_timeouts.load(Relaxed)
    }

    pub fn done(&self) {
        self.inflight.fetch_sub(1, Relaxed);
    }

    pub fn inflight(&self) -> u64 {
        self.inflight.load(Relaxed)
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Relaxed)
    }

    pub fn failures(&self) -> u64 {
        self.failures.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_server_lets_one_probe_through_after_recover_time() {
        let s = ServerLive::new(ServerState::Active, 1);
        assert!(s.available(5, 1000));
        assert!(s.mark_down(10));
        assert!(!s.mark_down(11), "second mark is not a transition");
        assert!(!s.available(500, 1000));
        assert!(s.available(1011, 1000), "recover time passed: probe");
        assert!(!s.available(1012, 1000), "only one probe per period");
        assert!(s.mark_up());
        assert!(s.available(1013, 1000));
        assert_eq!(s.health(), Health::Up);
        assert_eq!(s.failures(), 2);
    }
}
