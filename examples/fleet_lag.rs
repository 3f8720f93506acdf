//! Fleet sync lag against the rate partitions are learned at (issue 16), for `bench/fleet`.
//!
//! Two modes of one program:
//!
//! ```sh
//! # A WebSphere-like backend: every response announces `--fresh` (64) partitions no
//! # response announced before, over the clone ids given (one listener per clone id).
//! fleet_lag serve --listen 127.0.0.1:8081,127.0.0.1:8082 --clones c1,c2
//!
//! # Drives tether A (its proxy port) so that it learns each rate's partitions per minute,
//! # samples A's and B's /metrics every 100 ms and B's table size (admin API) every 10 ms,
//! # and prints the lag and CPU tables.
//! fleet_lag drive --proxy 127.0.0.1:8080 --metrics-a 127.0.0.1:9091 \
//!     --metrics-b 127.0.0.1:9092 --admin-b 127.0.0.1:9002 --pids A_PID,B_PID,REDIS_PID \
//!     --rates 10000,100000,1000000 --seconds 25 --raw samples.tsv
//! ```
//!
//! Lag is "how long after A had learned N partitions B had applied N", measured twice:
//!
//! - from the 100 ms samples (`--sample-ms`): A's `tether_wspt_entries_learned_total` and
//!   B's `tether_shared_state_applied_total{kind="partition"}`, both counted from the
//!   phase's start; for every level N A's samples show, the times A and B reached N are
//!   interpolated between the samples around them. Lags shorter than the sampling interval
//!   mostly read 0 here: both curves pass N between the same two samples.
//! - finely: A reached 64·k partitions when the k-th response came back (A learns a
//!   response's partitions before it forwards the response), and B's count is its partition
//!   table's size from `GET /status` every 10 ms (`--fine-ms`; B learns nothing itself).
//!
//! B's own `tether_shared_state_lag_seconds` (publish time to apply time of the last event
//! B applied) is reported from the 100 ms samples as well, and the CPU of Redis, A and B
//! (all threads, and the fleet's `BG fleet` thread) from /proc.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tether::sim::HttpClient;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn usage() -> ! {
    eprintln!(
        "usage: fleet_lag serve --listen ADDR[,ADDR...] --clones ID[,ID...] [--fresh 64]\n       \
         fleet_lag drive --proxy ADDR --metrics-a ADDR --metrics-b ADDR [--admin-b ADDR]\n       \
         \x20   [--pids A,B,REDIS] [--rates 10000,100000,1000000] [--seconds 25] [--catch-up 30]\n       \
         \x20   [--workers 8] [--fresh 64] [--sample-ms 100] [--fine-ms 10] [--raw FILE]"
    );
    std::process::exit(2)
}

/// `--name value` pairs.
fn flags(args: &[String]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut it = args.iter();
    while let Some(k) = it.next() {
        let Some(name) = k.strip_prefix("--") else {
            usage()
        };
        let Some(v) = it.next() else { usage() };
        out.insert(name.to_string(), v.clone());
    }
    out
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(mode) = args.first() else { usage() };
    let f = flags(&args[1..]);
    match mode.as_str() {
        "serve" => serve(&f).await,
        "drive" => drive(&f).await,
        _ => usage(),
    }
}

// --- the backend ---------------------------------------------------------------------------

async fn serve(f: &HashMap<String, String>) -> Res<()> {
    let addrs = list(f.get("listen").unwrap_or_else(|| usage()));
    let clones = Arc::new(list(f.get("clones").unwrap_or_else(|| usage())));
    let fresh: u64 = f.get("fresh").map_or(Ok(64), |v| v.parse())?;
    if clones.is_empty() || addrs.is_empty() {
        usage()
    }
    let next = Arc::new(AtomicU64::new(1));
    let mut tasks = Vec::new();
    for (i, a) in addrs.iter().enumerate() {
        let listener = TcpListener::bind(a.as_str()).await?;
        let (next, clones) = (next.clone(), clones.clone());
        let name = format!("was{}", i + 1);
        tasks.push(tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let (next, clones, name) = (next.clone(), clones.clone(), name.clone());
                tokio::spawn(async move {
                    let _ = connection(s, &next, &clones, &name, fresh).await;
                });
            }
        }));
    }
    eprintln!("fleet_lag: serving on {}", addrs.join(", "));
    for t in tasks {
        t.await?;
    }
    Ok(())
}

/// One keep-alive connection: GET requests without bodies, each answered with `fresh` new
/// partitions in `$WSPT`.
async fn connection(
    s: TcpStream,
    next: &AtomicU64,
    clones: &[String],
    name: &str,
    fresh: u64,
) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let (r, mut w) = s.into_split();
    let mut r = BufReader::new(r);
    let mut line = String::new();
    loop {
        // The request head, to its empty line.
        let mut close = false;
        loop {
            line.clear();
            if r.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if l.to_ascii_lowercase().starts_with("connection:") && l.contains("close") {
                close = true;
            }
        }
        let first = next.fetch_add(fresh, Relaxed);
        let mut wspt = String::with_capacity(fresh as usize * 16);
        for k in first..first + fresh {
            if !wspt.is_empty() {
                wspt.push_str(", ");
            }
            let clone = &clones[(k % clones.len() as u64) as usize];
            wspt.push_str(&format!("f{k}={clone}"));
        }
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Server: {name}\r\n$WSPT: {wspt}\r\n\r\nok\n"
        );
        w.write_all(resp.as_bytes()).await?;
        if close {
            return Ok(());
        }
    }
}

// --- the driver and sampler ----------------------------------------------------------------

/// One 100 ms sample of A, B, and the processes' CPU.
#[derive(Clone, Default)]
struct Sample {
    /// Seconds since the start, at the middle of each scrape.
    ta: f64,
    tb: f64,
    a_learned: f64,
    a_table: f64,
    a_published: f64,
    b_applied: f64,
    b_table: f64,
    b_lag: f64,
    b_up: f64,
    /// CPU seconds: A all threads, A's `fleet` thread(s), B, B's `fleet`, Redis.
    cpu: [f64; 5],
}

/// The value of `name` whose labels contain every `label="value"` in `labels`.
fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|l| labels.iter().all(|lab| l.contains(lab)))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// CPU seconds of a process: all its threads, and those named `BG fleet` (Pingora names a
/// background service's threads `BG <name>`: the fleet's sync task and its stream reader).
fn cpu_of(pid: u32, hz: f64) -> (f64, f64) {
    let (mut all, mut fleet) = (0u64, 0u64);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (f64::NAN, f64::NAN);
    };
    for t in tasks.flatten() {
        let dir = t.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let v: Vec<u64> = rest
            .split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|x| x.parse().ok())
            .collect();
        let ticks: u64 = v.iter().sum();
        all += ticks;
        if comm.starts_with("BG fleet") {
            fleet += ticks;
        }
    }
    (all as f64 / hz, fleet as f64 / hz)
}

async fn scrape(c: &mut HttpClient, start: Instant) -> (f64, String) {
    let t0 = start.elapsed().as_secs_f64();
    let body = match c.get("/metrics", &[]).await {
        Ok(r) => r.body_str().to_string(),
        Err(_) => String::new(),
    };
    let t1 = start.elapsed().as_secs_f64();
    ((t0 + t1) / 2.0, body)
}

fn addr(f: &HashMap<String, String>, k: &str) -> SocketAddr {
    f.get(k)
        .unwrap_or_else(|| usage())
        .parse()
        .unwrap_or_else(|_| usage())
}

/// First time a curve of (t, v) reaches `level`, interpolated between samples.
fn reached(curve: &[(f64, f64)], level: f64) -> Option<f64> {
    let j = curve.iter().position(|&(_, v)| v >= level)?;
    if j == 0 {
        return Some(curve[0].0);
    }
    let ((t0, v0), (t1, v1)) = (curve[j - 1], curve[j]);
    Some(t0 + (level - v0) / (v1 - v0) * (t1 - t0))
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v[i.min(v.len() - 1)]
}

struct Phase {
    rate: f64,
    start: f64,
    drive_end: f64,
    end: f64,
    /// When each answered request's response arrived (seconds since the start), sorted.
    answered: Vec<f64>,
    failed: u64,
}

/// One fine probe of B: its partition table's size (B learns nothing itself: the size is
/// what it applied) at the middle of a `GET /status`.
type Probe = (f64, f64);

async fn table_size(c: &mut HttpClient, start: Instant) -> Option<Probe> {
    let t0 = start.elapsed().as_secs_f64();
    let r = c.get("/status", &[]).await.ok()?;
    let t1 = start.elapsed().as_secs_f64();
    let json: serde_json::Value = serde_json::from_str(r.body_str()).ok()?;
    let size = json["clusters"][0]["partition_table"]["size"].as_f64()?;
    Some(((t0 + t1) / 2.0, size))
}

fn parse<T: std::str::FromStr>(f: &HashMap<String, String>, k: &str, default: T) -> T {
    f.get(k)
        .map_or(Some(default), |v| v.parse().ok())
        .unwrap_or_else(|| usage())
}

async fn drive(f: &HashMap<String, String>) -> Res<()> {
    let proxy = addr(f, "proxy");
    let (ma, mb) = (addr(f, "metrics-a"), addr(f, "metrics-b"));
    let admin_b = f.get("admin-b").map(|_| addr(f, "admin-b"));
    let pids: Vec<u32> = f
        .get("pids")
        .map(|p| list(p).iter().filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_default();
    let rates: Vec<f64> = list(f.get("rates").map_or("10000,100000,1000000", |s| s))
        .iter()
        .map(|r| r.parse())
        .collect::<Result<_, _>>()?;
    let seconds: f64 = parse(f, "seconds", 25.0);
    let catch_up: f64 = parse(f, "catch-up", 30.0);
    let workers: usize = parse(f, "workers", 8);
    let fresh: f64 = parse(f, "fresh", 64.0);
    let sample_ms: u64 = parse(f, "sample-ms", 100);
    let fine_ms: u64 = parse(f, "fine-ms", 10);
    let hz = 100.0; // USER_HZ on Linux

    let start = Instant::now();
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let probes: Arc<Mutex<Vec<Probe>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (samples, stop) = (samples.clone(), stop.clone());
        let pids = pids.clone();
        tokio::spawn(async move {
            let (mut ca, mut cb) = (HttpClient::new(ma), HttpClient::new(mb));
            let mut tick = tokio::time::interval(Duration::from_millis(sample_ms));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !stop.load(Relaxed) {
                tick.tick().await;
                let ((ta, a), (tb, b)) =
                    tokio::join!(scrape(&mut ca, start), scrape(&mut cb, start));
                let mut s = Sample {
                    ta,
                    tb,
                    a_learned: metric(&a, "tether_wspt_entries_learned_total", &[]),
                    a_table: metric(&a, "tether_partition_table_entries", &[]),
                    a_published: metric(
                        &a,
                        "tether_shared_state_published_total",
                        &["kind=\"partition\""],
                    ),
                    b_applied: metric(
                        &b,
                        "tether_shared_state_applied_total",
                        &["kind=\"partition\""],
                    ),
                    b_table: metric(&b, "tether_partition_table_entries", &[]),
                    b_lag: metric(&b, "tether_shared_state_lag_seconds", &[]),
                    b_up: metric(&b, "tether_shared_state_up", &[]),
                    cpu: [f64::NAN; 5],
                };
                if pids.len() >= 3 {
                    let (a_all, a_fleet) = cpu_of(pids[0], hz);
                    let (b_all, b_fleet) = cpu_of(pids[1], hz);
                    s.cpu = [a_all, a_fleet, b_all, b_fleet, cpu_of(pids[2], hz).0];
                }
                samples.lock().unwrap().push(s);
            }
        })
    };
    // The fine probe of B's table, for the lag below the sampler's resolution.
    let prober = admin_b.filter(|_| fine_ms > 0).map(|admin| {
        let (probes, stop) = (probes.clone(), stop.clone());
        tokio::spawn(async move {
            let mut c = HttpClient::new(admin);
            let mut tick = tokio::time::interval(Duration::from_millis(fine_ms));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !stop.load(Relaxed) {
                tick.tick().await;
                if let Some(p) = table_size(&mut c, start).await {
                    probes.lock().unwrap().push(p);
                }
            }
        })
    });
    let last = |samples: &Arc<Mutex<Vec<Sample>>>| samples.lock().unwrap().last().cloned();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut phases = Vec::new();
    for &rate in &rates {
        let per_sec = rate / 60.0 / fresh;
        eprintln!(
            "fleet_lag: {rate:.0} partitions/min: {per_sec:.1} responses/s through A for {seconds} s"
        );
        let p_start = start.elapsed().as_secs_f64();
        let base = last(&samples).unwrap_or_default();
        let (tx, rx) = tokio::sync::mpsc::channel::<()>(100_000);
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let answered: Arc<Mutex<Vec<f64>>> = Arc::default();
        let failed = Arc::new(AtomicU64::new(0));
        let mut pool = Vec::new();
        for _ in 0..workers {
            let (rx, answered, failed) = (rx.clone(), answered.clone(), failed.clone());
            pool.push(tokio::spawn(async move {
                let mut c = HttpClient::new(proxy);
                loop {
                    let next = rx.lock().await.recv().await;
                    if next.is_none() {
                        return;
                    }
                    match c.get("/app", &[]).await {
                        Ok(r) if r.status == 200 => {
                            answered.lock().unwrap().push(start.elapsed().as_secs_f64())
                        }
                        _ => {
                            failed.fetch_add(1, Relaxed);
                        }
                    }
                }
            }));
        }
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / per_sec));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let until = Instant::now() + Duration::from_secs_f64(seconds);
        while Instant::now() < until {
            tick.tick().await;
            let _ = tx.try_send(());
        }
        drop(tx);
        for w in pool {
            let _ = w.await;
        }
        let drive_end = start.elapsed().as_secs_f64();
        // Until B has applied what A learned in this phase (or catch_up passes).
        let deadline = Instant::now() + Duration::from_secs_f64(catch_up);
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let s = last(&samples).unwrap_or_default();
            let a = s.a_learned - base.a_learned;
            let b = s.b_applied - base.b_applied;
            if (b >= a && s.ta > drive_end + 0.3) || Instant::now() > deadline {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut answered = std::mem::take(&mut *answered.lock().unwrap());
        answered.sort_by(f64::total_cmp);
        phases.push(Phase {
            rate,
            start: p_start,
            drive_end,
            end: start.elapsed().as_secs_f64(),
            answered,
            failed: failed.load(Relaxed),
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    stop.store(true, Relaxed);
    let _ = sampler.await;
    if let Some(p) = prober {
        let _ = p.await;
    }
    let samples = samples.lock().unwrap().clone();
    let probes = probes.lock().unwrap().clone();

    if let Some(path) = f.get("raw") {
        let mut out = String::from(
            "t_a\tt_b\ta_learned\ta_table\ta_published\tb_applied\tb_table\tb_lag_s\tb_up\ta_cpu_s\ta_fleet_cpu_s\tb_cpu_s\tb_fleet_cpu_s\tredis_cpu_s\n",
        );
        for s in &samples {
            out.push_str(&format!(
                "{:.3}\t{:.3}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
                s.ta,
                s.tb,
                s.a_learned,
                s.a_table,
                s.a_published,
                s.b_applied,
                s.b_table,
                s.b_lag,
                s.b_up,
                s.cpu[0],
                s.cpu[1],
                s.cpu[2],
                s.cpu[3],
                s.cpu[4]
            ));
        }
        std::fs::write(path, out)?;
    }
    report(&phases, &samples, &probes, fresh);
    Ok(())
}

/// p50 / p99 / max of `v`, in ms.
fn spread(mut v: Vec<f64>) -> [String; 3] {
    [0.5, 0.99, 1.0].map(|q| ms(quantile(&mut v, q)))
}

fn report(phases: &[Phase], samples: &[Sample], probes: &[Probe], fresh: f64) {
    let mut lag_rows = Vec::new();
    let mut cpu_rows = Vec::new();
    for p in phases {
        let during: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.ta >= p.start && s.ta <= p.end)
            // A failed scrape reads NaN: left out.
            .filter(|s| s.a_learned.is_finite() && s.b_applied.is_finite())
            .collect();
        let (Some(first), Some(at_end)) =
            (during.first(), during.iter().rfind(|s| s.ta <= p.drive_end))
        else {
            continue;
        };
        // The sampled curves: A's learned and B's applied counts since the phase began.
        let a_curve: Vec<(f64, f64)> = during
            .iter()
            .map(|s| (s.ta, s.a_learned - first.a_learned))
            .collect();
        let b_curve: Vec<(f64, f64)> = during
            .iter()
            .map(|s| (s.tb, s.b_applied - first.b_applied))
            .collect();
        let mut curve_lags = Vec::new();
        let mut last_level = 0.0;
        for s in during.iter().filter(|s| s.ta <= p.drive_end) {
            let level = s.a_learned - first.a_learned;
            if level <= last_level {
                continue;
            }
            last_level = level;
            if let (Some(ta), Some(tb)) = (reached(&a_curve, level), reached(&b_curve, level)) {
                curve_lags.push(tb - ta);
            }
        }
        // The fine curves: A's from the responses' arrival (A learned each response's
        // partitions before it sent the response), B's from the fine probe of its table.
        let fine: Vec<(f64, f64)> = {
            let before = probes.iter().rfind(|(t, _)| *t <= p.start).map(|x| x.1);
            let base = before.unwrap_or(0.0);
            probes
                .iter()
                .filter(|(t, _)| *t > p.start && *t <= p.end)
                .map(|&(t, v)| (t, v - base))
                .collect()
        };
        let (mut fine_lags, mut behind) = (Vec::new(), 0);
        for (k, &t) in p.answered.iter().enumerate() {
            match reached(&fine, (k + 1) as f64 * fresh) {
                Some(tb) => fine_lags.push(tb - t),
                None => behind += 1,
            }
        }
        let gauge: Vec<f64> = during
            .iter()
            .filter(|s| s.tb >= p.start + 1.0 && s.tb <= p.drive_end && s.b_lag.is_finite())
            .map(|s| s.b_lag)
            .collect();
        let secs = at_end.ta - first.ta;
        let learned = at_end.a_learned - first.a_learned;
        let per_min = |d: f64| d / secs * 60.0;
        // When B had applied everything A learned in the phase, after the last response.
        let total = p.answered.len() as f64 * fresh;
        let last_answer = p.answered.last().copied().unwrap_or(p.drive_end);
        let caught = reached(&fine, total).map(|t| t - last_answer);
        let [f50, f99, fmax] = spread(fine_lags);
        let [c50, c99, cmax] = spread(curve_lags);
        let [g50, g99, gmax] = spread(gauge);
        lag_rows.push(format!(
            "{:>10.0} {:>9.0} {:>9.0} {:>6.1} {:>4} | {:>6} {:>6} {:>6} {:>4} {:>7} | {:>6} {:>6} {:>6} | {:>6} {:>6} {:>6}",
            p.rate,
            per_min(learned),
            per_min(at_end.b_applied - first.b_applied),
            p.answered.len() as f64 / (p.drive_end - p.start),
            p.failed,
            f50,
            f99,
            fmax,
            behind,
            caught.map_or("-".into(), ms),
            c50,
            c99,
            cmax,
            g50,
            g99,
            gmax,
        ));
        let cpu = |i: usize| at_end.cpu[i] - first.cpu[i];
        let pct = |i: usize| cpu(i) / secs * 100.0;
        let us_per = |i: usize| cpu(i) * 1e6 / learned.max(1.0);
        cpu_rows.push(format!(
            "{:>10.0} | {:>6.1} {:>6.1} {:>7.1} {:>6.1} {:>7.1} | {:>9.1} {:>9.1} {:>9.1}",
            p.rate,
            pct(4),
            pct(0),
            pct(1),
            pct(2),
            pct(3),
            us_per(4),
            us_per(1),
            us_per(3),
        ));
    }
    println!(
        "{:>10} {:>9} {:>9} {:>6} {:>4} | {:>6} {:>6} {:>6} {:>4} {:>7} | {:>6} {:>6} {:>6} | {:>6} {:>6} {:>6}",
        "target/min",
        "A learn/m",
        "B apply/m",
        "resp/s",
        "fail",
        "lag50",
        "lag99",
        "max",
        "late",
        "catchup",
        "crv50",
        "crv99",
        "max",
        "gau50",
        "gau99",
        "max"
    );
    for r in lag_rows {
        println!("{r}");
    }
    println!();
    println!(
        "{:>10} | {:>6} {:>6} {:>7} {:>6} {:>7} | {:>9} {:>9} {:>9}",
        "target/min",
        "Redis%",
        "A%",
        "Afleet%",
        "B%",
        "Bfleet%",
        "Redis µs",
        "Afleet µs",
        "Bfleet µs"
    );
    for r in cpu_rows {
        println!("{r}");
    }
}

fn ms(s: f64) -> String {
    if s.is_finite() {
        format!("{:.0}ms", s * 1000.0)
    } else {
        "-".into()
    }
}
