//! tether with an HTTP/3 listener, and aioquic's client (`tests/fixtures/h3client.py`) to
//! ask it: what the HTTP/3 tests share.

use super::pki::Pki;
use super::{scratch_dir, Opts, Tether};
use serde_json::Value;
use std::process::Command;

/// tether with an HTTP/3 TLS listener in front of `servers`.
pub fn start(servers: &str, extra: &str) -> (Tether, Pki) {
    let dir = scratch_dir("http3");
    let pki = Pki::new(&dir);
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{servers}"),
        listener_extra: format!(
            "    http3: true\n    tls:\n      cert: {}\n      key: {}\n{extra}",
            pki.path("a.crt"),
            pki.path("a.key")
        ),
        metrics: true,
        access_log: true,
        ..Opts::default()
    });
    (t, pki)
}

/// Runs the client's `plan` on one connection: one answer (or `{"error"}`) per request.
pub fn h3(t: &Tether, plan: Value) -> Vec<Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h3client.py");
    let out = Command::new("python3")
        .args([
            script,
            "127.0.0.1",
            &t.addr.port().to_string(),
            &plan.to_string(),
        ])
        .output()
        .expect("python3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named 'aioquic'"),
        "aioquic is not installed (./run installs it): {stderr}"
    );
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!answers.is_empty(), "no answer: {stderr}\n{}", t.log());
    answers
}

pub fn field<'a>(answer: &'a Value, name: &str) -> Option<&'a str> {
    answer["headers"]
        .as_array()?
        .iter()
        .find(|f| f[0] == name)
        .and_then(|f| f[1].as_str())
}

/// The access log once it has `lines` lines (it is written a moment after the answers).
pub fn access_log(t: &Tether, lines: usize) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let log = std::fs::read_to_string(t.dir.join("access.log")).unwrap_or_default();
        if log.lines().count() >= lines {
            return log;
        }
        assert!(std::time::Instant::now() < deadline, "{lines} lines: {log}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
