//! `tether demo` runs its Tomcat and WebSphere scenarios end to end and keeps serving.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_shows_weights_stickiness_and_failover_then_keeps_serving() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(common::tether_bin())
        .args(["demo", "--listen", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines = std::thread::spawn(move || {
        let mut out = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let done = line.contains("tether keeps serving");
            out.push(line);
            if done {
                break;
            }
        }
        out
    })
    .join()
    .unwrap();
    let text = lines.join("\n");
    let value = |label: &str| {
        lines
            .iter()
            .find(|l| l.trim_start().starts_with(label))
            .map(|l| l.split_whitespace().last().unwrap_or("").to_string())
            .unwrap_or_else(|| panic!("no `{label}` in:\n{text}"))
    };
    assert_eq!(
        value("requests answered by the session's server"),
        "200/200",
        "{text}"
    );
    assert_eq!(value("client errors"), "0", "{text}");
    for (server, expected) in [("tc1", "10"), ("tc2", "10"), ("tc3", "20")] {
        let row = lines
            .iter()
            .find(|l| l.trim_start().starts_with(server))
            .unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[2], expected, "new sessions of {server}:\n{text}");
    }
    let back: u32 = value("new sessions on tc3").parse().unwrap();
    assert!(back > 0, "tc3 came back:\n{text}");

    // The WebSphere part.
    assert_eq!(
        value("requests that reached the partition's owner"),
        "60/60",
        "{text}"
    );
    assert_eq!(value("requests carrying $WSFO"), "0", "{text}");
    let survived = value("sessions whose data survived");
    let (kept, moved) = survived.split_once('/').unwrap();
    assert!(moved != "0" && kept == moved, "{text}");
    assert_ne!(value("requests that carried $WSFO"), "0", "{text}");
    assert_eq!(value("new $WSFO tags"), "0", "{text}");

    let mut c = tether::cli::sim::HttpClient::new(([127, 0, 0, 1], port).into());
    assert_eq!(
        c.get("/", &[]).await.unwrap().status,
        200,
        "still serving after the scenario"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Reads the demo's stdout until `last` appears; returns the lines.
fn lines_until(stdout: std::process::ChildStdout, last: &'static str) -> Vec<String> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let done = line.contains(last);
            out.push(line);
            if done {
                break;
            }
        }
        out
    })
    .join()
    .unwrap()
}

#[test]
fn the_fleet_demo_shares_tables_and_drains_across_two_instances() {
    let mut child = Command::new(common::tether_bin())
        .args(["demo", "--fleet"])
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = lines_until(child.stdout.take().unwrap(), "keeps serving");
    let text = lines.join("\n");
    let value = |label: &str| {
        let line = lines
            .iter()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no `{label}` in:\n{text}"));
        line.trim_start()[label.len()..].trim().to_string()
    };
    assert!(
        value("edge-2's partition table, through Redis").starts_with("6 partitions after"),
        "{text}"
    );
    assert_eq!(
        value("requests answered by the session's server"),
        "120/120",
        "{text}"
    );
    assert_eq!(value("requests carrying $WSFO"), "0", "{text}");
    assert!(
        value("edge-2 sees was2 draining").starts_with("after"),
        "{text}"
    );
    assert_eq!(
        value("new sessions on was2 (10 through each edge)"),
        "0",
        "{text}"
    );
    let survived = value("sessions whose data survived (from the replica)");
    let (kept, moved) = survived.split_once('/').unwrap();
    assert!(moved != "0" && kept == moved, "{text}");
    assert_eq!(
        value("requests through edge-2 at the same server"),
        "20/20",
        "{text}"
    );
    assert_eq!(
        value("requests to was1 after it came back (stale)"),
        "0",
        "{text}"
    );
    assert_eq!(value("new $WSFO tags"), "0", "{text}");
    // SIGTERM: its redis-server and tether instances go with it.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}
