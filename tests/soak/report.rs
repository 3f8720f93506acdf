//! The soak's figures over time: a row every sampling interval (requests, failures,
//! misroutes, p99, and each instance's RSS and open fds) printed and written to
//! `soak.tsv`, the faults to `events.tsv` (what `bench/soak` plots), and the summary.

use crate::fleet::Fleet;
use crate::truth::{Kind, Stats, Truth};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy)]
struct Row {
    t: f64,
    requests: u64,
    rate: f64,
    failed: u64,
    excused: u64,
    misroutes: u64,
    p99_ms: f64,
    rss: [u64; 2],
    fds: [u64; 2],
    /// Taken while a hostile burst held connections open.
    burst: bool,
}

pub struct Sampler {
    rows: Arc<Mutex<Vec<Row>>>,
    events: Mutex<std::fs::File>,
    task: tokio::task::JoinHandle<()>,
    fleet: Arc<Fleet>,
    stats: Arc<Stats>,
    truth: Arc<Truth>,
    start: Instant,
}

const HEADER: &str =
    "t_s\trequests\treq_per_s\tfailed\texcused\tmisroutes\tp99_ms\trss_a_kib\trss_b_kib\tfds_a\tfds_b";

fn take(fleet: &Fleet, stats: &Stats, truth: &Truth, start: Instant, last: Option<&Row>) -> Row {
    let now = Instant::now();
    let t = now.duration_since(start).as_secs_f64();
    let since = last.map_or(start, |l| start + Duration::from_secs_f64(l.t));
    let burst = truth.overlaps(Kind::Burst, fleet.instances[0].name, since, now);
    let requests = stats.requests.load(Relaxed);
    let (rss_a, fds_a) = fleet.instances[0].rss_and_fds();
    let (rss_b, fds_b) = fleet.instances[1].rss_and_fds();
    let rate = match last {
        Some(l) if t > l.t => (requests - l.requests) as f64 / (t - l.t),
        _ => 0.0,
    };
    Row {
        t,
        requests,
        rate,
        failed: stats.failed.load(Relaxed),
        excused: stats.excused_total(),
        misroutes: stats.misroutes.load(Relaxed)
            + stats.wsfo_wrong.load(Relaxed)
            + stats.lost.load(Relaxed)
            + stats.drained_new.load(Relaxed),
        p99_ms: stats.take_p99_ms(),
        rss: [rss_a, rss_b],
        fds: [fds_a, fds_b],
        burst,
    }
}

fn line(r: &Row) -> String {
    format!(
        "{:.1}\t{}\t{:.0}\t{}\t{}\t{}\t{:.2}\t{}\t{}\t{}\t{}",
        r.t,
        r.requests,
        r.rate,
        r.failed,
        r.excused,
        r.misroutes,
        r.p99_ms,
        r.rss[0],
        r.rss[1],
        r.fds[0],
        r.fds[1]
    )
}

impl Sampler {
    pub fn start(
        fleet: Arc<Fleet>,
        stats: Arc<Stats>,
        truth: Arc<Truth>,
        start: Instant,
        every: Duration,
        out: &Path,
    ) -> Sampler {
        let rows = Arc::new(Mutex::new(Vec::new()));
        let mut tsv = std::fs::File::create(out.join("soak.tsv")).unwrap();
        writeln!(tsv, "{HEADER}").unwrap();
        let mut events = std::fs::File::create(out.join("events.tsv")).unwrap();
        writeln!(events, "t_s\tfault").unwrap();
        eprintln!("{HEADER}");
        let task = tokio::spawn({
            let (fleet, stats, truth, rows) =
                (fleet.clone(), stats.clone(), truth.clone(), rows.clone());
            async move {
                let mut tick = tokio::time::interval_at((start + every).into(), every);
                loop {
                    tick.tick().await;
                    let last = rows.lock().unwrap().last().copied();
                    let row = take(&fleet, &stats, &truth, start, last.as_ref());
                    let l = line(&row);
                    eprintln!("{l}");
                    let _ = writeln!(tsv, "{l}");
                    rows.lock().unwrap().push(row);
                }
            }
        });
        Sampler {
            rows,
            events: Mutex::new(events),
            task,
            fleet,
            stats,
            truth,
            start,
        }
    }

    pub fn event(&self, at: f64, what: &str) {
        let _ = writeln!(self.events.lock().unwrap(), "{at:.1}\t{what}");
    }

    /// Stops sampling; the summary of the run.
    pub async fn finish(self, faults: usize, stats: &Stats) -> String {
        self.task.abort();
        let _ = self.task.await;
        let rows = self.rows.lock().unwrap().clone();
        let last = take(&self.fleet, &self.stats, &self.truth, self.start, None);
        let mut s = String::new();
        let secs = last.t;
        let _ = writeln!(
            s,
            "soak: {:.1} min, {faults} faults, {} requests ({:.0}/s), {} answered",
            secs / 60.0,
            last.requests,
            last.requests as f64 / secs,
            stats.ok.load(Relaxed)
        );
        let _ = writeln!(
            s,
            "failed, not excused: {}; misroutes: {}; $WSFO while affinity held: {}; sessions lost: {}; new sessions on a draining server: {}; fault or burst checks failed: {}",
            stats.failed.load(Relaxed),
            stats.misroutes.load(Relaxed),
            stats.wsfo_wrong.load(Relaxed),
            stats.lost.load(Relaxed),
            stats.drained_new.load(Relaxed),
            stats.fault_failed.load(Relaxed)
        );
        let excused = stats.excused.lock().unwrap().clone();
        let _ = writeln!(
            s,
            "failed or misrouted, excused by a fault: {}",
            stats.excused_total()
        );
        for (why, n) in excused {
            let _ = writeln!(s, "  {n}: {why}");
        }
        let _ = writeln!(
            s,
            "expected moves: {} sessions failed over from a killed server, {} followed their partition; {} HTTP/2 requests sent again after GOAWAY",
            stats.failed_over.load(Relaxed),
            stats.moved_with_partition.load(Relaxed),
            stats.resent.load(Relaxed)
        );
        // Flatness after the warm-up (the first tenth of the run), of instance a, which
        // runs from start to end (b is replaced by each upgrade), outside the hostile
        // bursts (whose connections a holds open for a few seconds).
        let warm: Vec<&Row> = rows
            .iter()
            .filter(|r| r.t >= secs / 10.0 && !r.burst)
            .collect();
        if warm.len() >= 2 {
            for (what, pick) in [
                (
                    "RSS of a (KiB)",
                    &(|r: &Row| r.rss[0]) as &dyn Fn(&Row) -> u64,
                ),
                ("open fds of a", &|r: &Row| r.fds[0]),
                ("RSS of b (KiB)", &|r: &Row| r.rss[1]),
                ("open fds of b", &|r: &Row| r.fds[1]),
            ] {
                let mut v: Vec<u64> = warm.iter().map(|r| pick(r)).collect();
                v.sort_unstable();
                let median = v[v.len() / 2] as f64;
                let (lo, hi) = (v[0] as f64, v[v.len() - 1] as f64);
                let _ = writeln!(
                    s,
                    "{what} after warm-up: median {median:.0}, {lo:.0}–{hi:.0} ({:+.1}% to {:+.1}%); first {}, last {}",
                    (lo / median - 1.0) * 100.0,
                    (hi / median - 1.0) * 100.0,
                    pick(warm[0]),
                    pick(warm[warm.len() - 1])
                );
            }
            let mut p99: Vec<f64> = warm.iter().map(|r| r.p99_ms).collect();
            p99.sort_by(f64::total_cmp);
            let _ = writeln!(
                s,
                "p99 per interval after warm-up: median {:.2} ms, worst {:.2} ms",
                p99[p99.len() / 2],
                p99[p99.len() - 1]
            );
        }
        s
    }
}
