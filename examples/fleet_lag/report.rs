//! The lag and CPU tables of a run.

use super::drive::{quantile, reached, Phase, Probe, Sample};

/// p50 / p99 / max of `v`, in ms.
pub(crate) fn spread(mut v: Vec<f64>) -> [String; 3] {
    [0.5, 0.99, 1.0].map(|q| ms(quantile(&mut v, q)))
}

pub(crate) fn report(phases: &[Phase], samples: &[Sample], probes: &[Probe], fresh: f64) {
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

pub(crate) fn ms(s: f64) -> String {
    if s.is_finite() {
        format!("{:.0}ms", s * 1000.0)
    } else {
        "-".into()
    }
}
