//! Reloads that must be refused or reported, and servers added to a health-checked cluster.

mod common;

use common::{server_line, tomcats, Opts, Tether};
use std::process::Command;
use std::time::{Duration, Instant};

fn sighup(t: &Tether) {
    let pid = std::fs::read_to_string(t.dir.join("tether.pid")).unwrap();
    assert!(Command::new("kill")
        .args(["-HUP", pid.trim()])
        .status()
        .unwrap()
        .success());
}

async fn wait_for_log(t: &Tether, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = t.log();
        if log.contains(needle) {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "no `{needle}` in the log:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_file_on_sighup_is_rejected_and_the_old_config_keeps_serving() {
    let sims = tomcats(2).await;
    let cluster = format!(
        "    servers:\n{}{}",
        server_line(&sims[0], ""),
        server_line(&sims[1], "")
    );
    let t = Tether::start_with(Opts {
        cluster,
        admin: true,
        metrics: true,
        log: Some("warn,tether=info"),
        ..Opts::default()
    });
    let good = std::fs::read_to_string(t.config_path()).unwrap();
    std::fs::write(
        t.config_path(),
        good.replace("cluster: shop", "cluster: nowhere")
            .replace("name: tc2", "name: tc1"),
    )
    .unwrap();
    sighup(&t);
    let log = wait_for_log(&t, "config reload (SIGHUP) rejected").await;
    assert!(
        log.contains("unknown cluster `nowhere`") && log.contains("duplicate server name"),
        "every error is reported:\n{log}"
    );
    let mut c = t.client();
    for _ in 0..4 {
        assert_eq!(
            c.get("/", &[]).await.unwrap().status,
            200,
            "still serving the old config"
        );
    }
    let metrics = tether::cli::sim::HttpClient::new(t.metrics.unwrap())
        .get("/metrics", &[])
        .await
        .unwrap();
    assert!(
        metrics
            .body_str()
            .contains("tether_config_reloads_total{result=\"failure\"} 1"),
        "{}",
        metrics.body_str()
    );

    // What a reload cannot change is reported.
    let moved = good.replace(&t.addr.to_string(), "127.0.0.1:1");
    std::fs::write(t.config_path(), moved).unwrap();
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(
        json["needs_upgrade"],
        serde_json::json!(["listeners (names or addresses)"])
    );
    assert_eq!(
        c.get("/", &[]).await.unwrap().status,
        200,
        "the listener stays where it was"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_added_to_a_checked_cluster_waits_for_its_checks() {
    let sims = tomcats(3).await;
    let hc = "    health_check: { kind: tcp, interval: 300ms, timeout: 200ms, rise: 2, fall: 1 }\n";
    let cluster = format!(
        "{hc}    servers:\n{}{}",
        server_line(&sims[0], ""),
        server_line(&sims[1], "")
    );
    let t = Tether::start_with(Opts {
        cluster,
        admin: true,
        ..Opts::default()
    });
    let text = std::fs::read_to_string(t.config_path()).unwrap();
    std::fs::write(
        t.config_path(),
        format!("{text}{}", server_line(&sims[2], "")),
    )
    .unwrap();
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_eq!(status, 200, "{json}");
    let (_, health, _) = t.server_status(None, "tc3").await;
    assert_eq!(
        health, "down",
        "a new server is not used before its checks pass"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while t.server_status(None, "tc3").await.1 != "up" {
        assert!(Instant::now() < deadline, "tc3 never came up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut c = t.client();
    let mut on_tc3 = 0;
    for _ in 0..9 {
        on_tc3 += (c.get("/", &[]).await.unwrap().header("x-server") == Some("tc3")) as u32;
    }
    assert_eq!(on_tc3, 3, "in rotation once its checks passed");
}
