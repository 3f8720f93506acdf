//! `tether drain CLUSTER/SERVER [--wait [--timeout 45m] [--then stop]]`: drains a server
//! through the admin API and, with `--wait`, prints its live sessions and "empty by" as
//! they change until none is left (exit 0, after stopping it with `--then stop`) or the
//! timeout passes (exit 1). For Ansible and Jenkins as much as for people.

use super::admin_client::AdminClient;
use crate::config::Config;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// What `tether drain` was asked.
pub struct Drain {
    pub target: String,
    pub wait: bool,
    pub timeout: Duration,
    pub then_stop: bool,
    /// How often the sessions are looked at while waiting.
    pub every: Duration,
}

/// Runs the command against the admin API of `config`.
pub fn run(config: &Config, d: &Drain) -> ExitCode {
    match drain(config, d) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tether drain: {e}");
            ExitCode::from(2)
        }
    }
}

fn drain(config: &Config, d: &Drain) -> Result<ExitCode, String> {
    let (cluster, server) = d
        .target
        .split_once('/')
        .filter(|(c, s)| !c.is_empty() && !s.is_empty() && !s.contains('/'))
        .ok_or_else(|| format!("`{}` is not CLUSTER/SERVER", d.target))?;
    let client = AdminClient::of(config)?;
    let base = format!("/clusters/{cluster}/servers/{server}");
    let (status, answer) = client.call("POST", &format!("{base}/drain"))?;
    if status != 200 {
        return Err(format!(
            "draining {cluster}/{server}: {status} {}",
            answer["error"]
        ));
    }
    println!(
        "{cluster}/{server}: draining (was {})",
        answer["previous"].as_str().unwrap_or("?")
    );
    if !d.wait {
        return Ok(ExitCode::SUCCESS);
    }
    let start = Instant::now();
    let mut shown = None;
    loop {
        let (status, s) = client.call("GET", &format!("{base}/sessions"))?;
        if status != 200 {
            return Err(format!(
                "reading the sessions of {cluster}/{server}: {status} {}",
                s["error"]
            ));
        }
        let live = s["live_sessions"].as_u64().unwrap_or(0);
        // No session seen is not yet no session until tether has watched a whole timeout.
        let knows_all = s["knows_all"].as_bool().unwrap_or(true);
        let line = match live {
            0 if !knows_all => format!(
                "{cluster}/{server}: no live session seen; waiting until tether has watched a whole session timeout"
            ),
            0 => format!("{cluster}/{server}: no live session left"),
            n => format!(
                "{cluster}/{server}: {n} live session{}, empty by {}",
                if n == 1 { "" } else { "s" },
                s["empty_by"].as_str().unwrap_or("?")
            ),
        };
        if shown.as_ref() != Some(&line) {
            println!("{line}");
            shown = Some(line);
        }
        if live == 0 && knows_all {
            break;
        }
        if start.elapsed() >= d.timeout {
            let left = match live {
                0 => "may still have sessions tether has not seen".to_string(),
                n => format!("still has {n} live sessions"),
            };
            eprintln!(
                "tether drain: {cluster}/{server} {left} after {}s; it stays draining",
                d.timeout.as_secs()
            );
            return Ok(ExitCode::from(1));
        }
        std::thread::sleep(
            d.every
                .min(d.timeout.saturating_sub(start.elapsed()))
                .max(Duration::from_millis(10)),
        );
    }
    if d.then_stop {
        let (status, answer) = client.call("POST", &format!("{base}/stop"))?;
        if status != 200 {
            return Err(format!(
                "stopping {cluster}/{server}: {status} {}",
                answer["error"]
            ));
        }
        println!("{cluster}/{server}: stopped");
    }
    Ok(ExitCode::SUCCESS)
}
