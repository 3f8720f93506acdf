//! The driver and sampler: drives tether A at each rate, samples A's and B's metrics and
//! B's table size, and hands the phases to the report.

use super::report::report;
use super::*;

/// One 100 ms sample of A, B, and the processes' CPU.
#[derive(Clone, Default)]
pub(crate) struct Sample {
    /// Seconds since the start, at the middle of each scrape.
    pub(crate) ta: f64,
    pub(crate) tb: f64,
    pub(crate) a_learned: f64,
    pub(crate) a_table: f64,
    pub(crate) a_published: f64,
    pub(crate) b_applied: f64,
    pub(crate) b_table: f64,
    pub(crate) b_lag: f64,
    pub(crate) b_up: f64,
    /// CPU seconds: A all threads, A's `fleet` thread(s), B, B's `fleet`, Redis.
    pub(crate) cpu: [f64; 5],
}

/// The value of `name` whose labels contain every `label="value"` in `labels`.
pub(crate) fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
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
pub(crate) fn cpu_of(pid: u32, hz: f64) -> (f64, f64) {
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

pub(crate) async fn scrape(c: &mut HttpClient, start: Instant) -> (f64, String) {
    let t0 = start.elapsed().as_secs_f64();
    let body = match c.get("/metrics", &[]).await {
        Ok(r) => r.body_str().to_string(),
        Err(_) => String::new(),
    };
    let t1 = start.elapsed().as_secs_f64();
    ((t0 + t1) / 2.0, body)
}

pub(crate) fn addr(f: &HashMap<String, String>, k: &str) -> SocketAddr {
    f.get(k)
        .unwrap_or_else(|| usage())
        .parse()
        .unwrap_or_else(|_| usage())
}

/// First time a curve of (t, v) reaches `level`, interpolated between samples.
pub(crate) fn reached(curve: &[(f64, f64)], level: f64) -> Option<f64> {
    let j = curve.iter().position(|&(_, v)| v >= level)?;
    if j == 0 {
        return Some(curve[0].0);
    }
    let ((t0, v0), (t1, v1)) = (curve[j - 1], curve[j]);
    Some(t0 + (level - v0) / (v1 - v0) * (t1 - t0))
}

pub(crate) fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v[i.min(v.len() - 1)]
}

pub(crate) struct Phase {
    pub(crate) rate: f64,
    pub(crate) start: f64,
    pub(crate) drive_end: f64,
    pub(crate) end: f64,
    /// When each answered request's response arrived (seconds since the start), sorted.
    pub(crate) answered: Vec<f64>,
    pub(crate) failed: u64,
}

/// One fine probe of B: its partition table's size (B learns nothing itself: the size is
/// what it applied) at the middle of a `GET /status`.
pub(crate) type Probe = (f64, f64);

pub(crate) async fn table_size(c: &mut HttpClient, start: Instant) -> Option<Probe> {
    let t0 = start.elapsed().as_secs_f64();
    let r = c.get("/status", &[]).await.ok()?;
    let t1 = start.elapsed().as_secs_f64();
    let json: serde_json::Value = serde_json::from_str(r.body_str()).ok()?;
    let size = json["clusters"][0]["partition_table"]["size"].as_f64()?;
    Some(((t0 + t1) / 2.0, size))
}

pub(crate) fn parse<T: std::str::FromStr>(f: &HashMap<String, String>, k: &str, default: T) -> T {
    f.get(k)
        .map_or(Some(default), |v| v.parse().ok())
        .unwrap_or_else(|| usage())
}

pub(crate) async fn drive(f: &HashMap<String, String>) -> Res<()> {
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
