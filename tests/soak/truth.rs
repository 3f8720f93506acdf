//! What the soak knows happened (the faults' windows: a server down, a server draining),
//! what it counts, and the judgement of every answer against both: the right server for
//! its session, its session kept, `$WSFO` only on failover, no new session on a draining
//! server, and which failures a fault excuses.

use crate::clients::Seen;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// A server killed: from the kill until it is back and tether has seen it again.
    Down,
    /// A server drained: from the first drain call to the last activate call.
    Draining,
    /// A hostile burst against an instance (its open fds count the burst's connections).
    Burst,
}

struct Window {
    kind: Kind,
    subject: String,
    from: Instant,
    to: Option<Instant>,
}

#[derive(Default)]
pub struct Truth {
    windows: Mutex<Vec<Window>>,
}

impl Truth {
    /// A window opens now; its index closes it.
    pub fn open(&self, kind: Kind, subject: &str) -> usize {
        let mut w = self.windows.lock().unwrap();
        w.push(Window {
            kind,
            subject: subject.to_string(),
            from: Instant::now(),
            to: None,
        });
        w.len() - 1
    }

    /// The window closes `after` from now.
    pub fn close(&self, index: usize, after: Duration) {
        self.windows.lock().unwrap()[index].to = Some(Instant::now() + after);
    }

    /// Some window of `kind` on `subject` overlaps `[from, to]`.
    pub fn overlaps(&self, kind: Kind, subject: &str, from: Instant, to: Instant) -> bool {
        self.windows.lock().unwrap().iter().any(|w| {
            w.kind == kind && w.subject == subject && w.from <= to && w.to.is_none_or(|t| t >= from)
        })
    }

    /// Some window of `kind` on `subject` holds all of `[from, to]`.
    pub fn covers(&self, kind: Kind, subject: &str, from: Instant, to: Instant) -> bool {
        self.windows.lock().unwrap().iter().any(|w| {
            w.kind == kind && w.subject == subject && w.from <= from && w.to.is_none_or(|t| t >= to)
        })
    }

    /// Some window of `kind` on any of `subjects` overlaps `[from, to]`.
    pub fn any_overlaps(
        &self,
        kind: Kind,
        subjects: &[String],
        from: Instant,
        to: Instant,
    ) -> bool {
        subjects.iter().any(|s| self.overlaps(kind, s, from, to))
    }
}

/// Seconds since the run's start (its first call).
pub fn since_start() -> f64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// Counters of the whole run; latencies of the current sampling interval.
#[derive(Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub ok: AtomicU64,
    /// Failed requests no fault excuses.
    pub failed: AtomicU64,
    /// Failed or misrouted requests a fault excuses, by why.
    pub excused: Mutex<BTreeMap<&'static str, u64>>,
    /// Answered by a server other than its session's, which was up.
    pub misroutes: AtomicU64,
    /// `$WSFO` sent while the session's server was up (IBM PK48101, PM30968).
    pub wsfo_wrong: AtomicU64,
    /// A session's server made it anew, or its count did not go on.
    pub lost: AtomicU64,
    /// A new session given to a draining server.
    pub drained_new: AtomicU64,
    /// Sessions moved off a killed server (expected), by cluster.
    pub failed_over: AtomicU64,
    /// Sessions that followed their partition to its new owner (expected).
    pub moved_with_partition: AtomicU64,
    /// HTTP/2 requests sent again because the server did not take them (GOAWAY).
    pub resent: AtomicU64,
    /// Faults that did not go as they must (an upgrade that failed, a drain refused) and
    /// checks of the hostile bursts that did not hold.
    pub fault_failed: AtomicU64,
    pub latencies_us: Mutex<Vec<u32>>,
    /// The first problems, said in full.
    pub notes: Mutex<Vec<String>>,
}

impl Stats {
    /// A problem, said in full with the time since the run's start (the first 200).
    pub fn note(&self, what: String) {
        let t = since_start();
        let mut n = self.notes.lock().unwrap();
        if n.len() < 200 {
            n.push(format!("[{t:7.1} s] {what}"));
        }
    }

    fn excuse(&self, why: &'static str) {
        *self.excused.lock().unwrap().entry(why).or_default() += 1;
    }

    pub fn excused_total(&self) -> u64 {
        self.excused.lock().unwrap().values().sum()
    }

    /// The 99th percentile of this interval's latencies, in ms; the interval starts anew.
    pub fn take_p99_ms(&self) -> f64 {
        let mut l = std::mem::take(&mut *self.latencies_us.lock().unwrap());
        if l.is_empty() {
            return 0.0;
        }
        l.sort_unstable();
        l[(l.len() * 99 / 100).min(l.len() - 1)] as f64 / 1000.0
    }
}

/// A cluster as the judge sees it.
pub struct Cluster {
    pub name: &'static str,
    /// The path its requests start with.
    pub prefix: &'static str,
    pub servers: Vec<String>,
    /// WebSphere: the partition owners' cluster, and server name → clone id.
    pub websphere: Option<(tether::cli::sim::WasCluster, Vec<(String, String)>)>,
}

impl Cluster {
    /// WebSphere: the server that owns the partition `cookie` names, now.
    pub fn partition_owner(&self, cookie: &str) -> Option<String> {
        let (cluster, clones) = self.websphere.as_ref()?;
        let (_, token) = cookie.split_once(':')?;
        let owner = cluster.owner(token)?;
        clones
            .iter()
            .find(|(_, c)| *c == owner)
            .map(|(s, _)| s.clone())
    }

    /// WebSphere: the session's partition is now owned by `server`.
    fn owns_partition(&self, cookie: &str, server: &str) -> bool {
        let Some((cluster, clones)) = &self.websphere else {
            return false;
        };
        let Some((_, token)) = cookie.split_once(':') else {
            return false;
        };
        let clone = clones.iter().find(|(s, _)| s == server).map(|(_, c)| c);
        cluster.owner(token).is_some_and(|o| Some(&o) == clone)
    }
}

pub struct Session {
    pub cookie: String,
    pub home: String,
    pub count: u64,
}

/// One request's facts.
pub struct Asked<'a> {
    pub cluster: &'a Cluster,
    pub from: Instant,
    pub to: Instant,
    /// Which user, instance and protocol: for the notes.
    pub who: &'a str,
    pub resent: bool,
    /// WebSphere: the server that owned the session's partition when the request left
    /// (tether routes by the partition's owner, which may differ from the server that
    /// answered last).
    pub owner: Option<String>,
}

/// Judges one answer and carries the user's session forward.
pub fn judge(
    truth: &Truth,
    stats: &Stats,
    a: &Asked,
    session: &mut Option<Session>,
    result: Result<Seen, String>,
) {
    stats.requests.fetch_add(1, Relaxed);
    if a.resent {
        stats.resent.fetch_add(1, Relaxed);
    }
    let down = |server: &str| truth.overlaps(Kind::Down, server, a.from, a.to);
    let seen = match result {
        Ok(s) if s.status == 200 => s,
        other => {
            let what = match &other {
                Ok(s) => format!("HTTP {} from {:?}", s.status, s.server),
                Err(e) => e.clone(),
            };
            match session {
                Some(s) if down(&s.home) => {
                    stats.excuse("its session's server was killed meanwhile")
                }
                None if truth.any_overlaps(Kind::Down, &a.cluster.servers, a.from, a.to) => {
                    stats.excuse("a new session's server was killed meanwhile")
                }
                _ => {
                    stats.failed.fetch_add(1, Relaxed);
                    stats.note(format!("{}: failed: {what}", a.who));
                }
            }
            return;
        }
    };
    stats.ok.fetch_add(1, Relaxed);
    let us =
        a.to.duration_since(a.from)
            .as_micros()
            .min(u32::MAX as u128) as u32;
    stats.latencies_us.lock().unwrap().push(us);
    let Some(s) = session.as_mut() else {
        if truth.covers(Kind::Draining, &seen.server, a.from, a.to) {
            stats.drained_new.fetch_add(1, Relaxed);
            stats.note(format!(
                "{}: a new session on draining {}",
                a.who, seen.server
            ));
        }
        match seen.set_cookie {
            Some(cookie) => {
                *session = Some(Session {
                    cookie,
                    home: seen.server,
                    count: seen.count.unwrap_or(0),
                })
            }
            None => {
                stats.failed.fetch_add(1, Relaxed);
                stats.note(format!("{}: no session made by {}", a.who, seen.server));
            }
        }
        return;
    };
    let home_down = down(&s.home);
    let owner_down = a.owner.as_deref().is_some_and(down);
    if seen.failover && !home_down && owner_down {
        // The partition's owner was killed: a failover by partition, with `$WSFO`, to
        // wherever it goes (here, the server that answered last).
        stats.excuse("failed over by its partition, whose owner was killed");
    } else if seen.failover && !home_down {
        stats.wsfo_wrong.fetch_add(1, Relaxed);
        stats.note(format!(
            "{}: $WSFO sent to {} while {} was up ({})",
            a.who, seen.server, s.home, s.cookie
        ));
    }
    let new_session = seen.set_cookie.as_ref().is_some_and(|c| *c != s.cookie);
    let kept = !new_session && seen.count == Some(s.count + 1);
    if seen.server != s.home {
        if home_down {
            stats.failed_over.fetch_add(1, Relaxed);
            // WebSphere keeps the session (`$WSFO`, or its partition's new owner serves it
            // from the replica); Tomcat's sims do not replicate.
            if a.cluster.websphere.is_some() && !kept {
                stats.lost.fetch_add(1, Relaxed);
                stats.note(format!(
                    "{}: failover from {} to {} lost {} ($WSFO: {}, new session: {new_session}, count {:?} after {})",
                    a.who, s.home, seen.server, s.cookie, seen.failover, seen.count, s.count
                ));
            }
        } else if a.cluster.owns_partition(&s.cookie, &seen.server) && kept {
            stats.moved_with_partition.fetch_add(1, Relaxed);
        } else if down(&seen.server) {
            // The server that answered was coming back: the two instances check it each
            // on its own, and may see it up a second apart. A session made on it by one
            // meanwhile may be served by the other elsewhere (with `$WSFO`), then by it
            // again.
            stats.excuse("the instances saw a restarted server up a moment apart");
        } else {
            stats.misroutes.fetch_add(1, Relaxed);
            stats.note(format!(
                "{}: {} answered for {} (home {}, up; $WSFO: {}, new session: {new_session}, count {:?} after {})",
                a.who, seen.server, s.cookie, s.home, seen.failover, seen.count, s.count
            ));
        }
    } else if !kept {
        // Sent again after its connection closed, a request may have reached the server
        // twice.
        let twice = a.resent && seen.count == Some(s.count + 2);
        if !twice && !home_down {
            stats.lost.fetch_add(1, Relaxed);
            stats.note(format!(
                "{}: {} count {:?} after {} (new session: {new_session})",
                a.who, s.cookie, seen.count, s.count
            ));
        }
    }
    if let Some(cookie) = seen.set_cookie {
        s.cookie = cookie;
    }
    s.home = seen.server;
    s.count = seen.count.unwrap_or(0);
}
