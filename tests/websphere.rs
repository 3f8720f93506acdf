//! WebSphere memory-to-memory affinity through a real tether process: the partition table,
//! `$WSFO` only on failover (PM30968), persistence across restarts (PK48101), header hygiene.

mod common;

use common::fleet::{cluster_yaml_with as cluster_yaml, was_cluster};
use common::{scratch_dir, Browser, Opts, Tether};
use std::time::Duration;
use tether::cli::sim::WebSphereSim;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Options for a tether in front of `sims` that keeps its tables in `<state>/state`, with
/// its own files in `dir`.
fn with_state_dir(sims: &[WebSphereSim], state: &std::path::Path, dir: std::path::PathBuf) -> Opts {
    Opts {
        cluster: cluster_yaml(sims, ""),
        top: format!("state_dir: {}/state\n", state.display()),
        dir: Some(dir),
        ..Opts::default()
    }
}

fn wsfo_total(sims: &[WebSphereSim]) -> u64 {
    sims.iter().map(|s| s.wsfo_received()).sum()
}

/// New sessions for `n` browsers; returns each browser's home server.
async fn new_sessions(t: &Tether, n: usize) -> (Vec<Browser>, Vec<String>) {
    let mut browsers: Vec<Browser> = (0..n).map(|_| Browser::new(t)).collect();
    let mut homes = Vec::new();
    for b in &mut browsers {
        let (status, server) = b.get("/app").await;
        assert_eq!(status, 200);
        homes.push(server);
    }
    (browsers, homes)
}

fn count(resp: &tether::cli::sim::Response) -> u64 {
    resp.header("x-session-count").unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pm30968_affinity_holds_and_no_request_is_tagged() {
    let (_cluster, sims) = was_cluster().await;
    let t = Tether::start(&cluster_yaml(&sims, ""));
    let (mut browsers, homes) = new_sessions(&t, 50).await;
    for b in &browsers {
        let id = b.cookie.as_deref().unwrap();
        assert!(
            id.starts_with("0000") && id.len() == 4 + 23 + 4,
            "WebSphere id: {id}"
        );
    }
    let mut at_home = 0;
    for round in 0..20 {
        for (b, home) in browsers.iter_mut().zip(&homes) {
            let (status, server) = b.get(&format!("/app/{round}")).await;
            assert_eq!(status, 200);
            at_home += (server == *home) as u32;
        }
    }
    assert_eq!(at_home, 1000, "every request reached the partition's owner");
    assert_eq!(wsfo_total(&sims), 0, "no request carried $WSFO");
    for (s, own) in sims
        .iter()
        .zip([["101", "102"], ["201", "202"], ["301", "302"]])
    {
        assert_eq!(s.partitions(), own, "no partition changed hands");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_tags_wsfo_keeps_the_session_and_learns_the_new_owner() {
    let (cluster, sims) = was_cluster().await;
    let t = Tether::start(&cluster_yaml(&sims, ""));
    let (mut browsers, homes) = new_sessions(&t, 30).await;
    let mut counts = Vec::new();
    for b in &mut browsers {
        let cookie = format!("JSESSIONID={}", b.cookie.as_ref().unwrap());
        counts.push(count(
            &b.http.get("/", &[("Cookie", &cookie)]).await.unwrap(),
        ));
    }
    sims[0].stop().await;
    let orphans: Vec<usize> = (0..homes.len()).filter(|&i| homes[i] == "was1").collect();
    assert!(!orphans.is_empty());
    for &i in &orphans {
        let cookie = format!("JSESSIONID={}", browsers[i].cookie.as_ref().unwrap());
        let resp = browsers[i]
            .http
            .get("/", &[("Cookie", &cookie)])
            .await
            .unwrap();
        assert_eq!(resp.status, 200, "no client error on failover");
        assert_ne!(resp.header("x-server"), Some("was1"));
        assert_eq!(
            count(&resp),
            counts[i] + 1,
            "the session's data survived (from the replica)"
        );
        assert!(
            resp.header("$wspt").is_none(),
            "$WSPT never reaches the client"
        );
    }
    let tagged = wsfo_total(&sims);
    assert!(tagged >= 1, "the failover carried $WSFO");
    assert!(
        tagged <= 2,
        "one takeover per partition, not one per request ({tagged})"
    );
    let new_owner = cluster.owner("101").unwrap();
    assert_ne!(new_owner, "c1", "partition 101 was taken over");

    // The new owner's $WSPT updated the table: later requests go there, untagged.
    for _ in 0..3 {
        for &i in &orphans {
            let cookie = format!("JSESSIONID={}", browsers[i].cookie.as_ref().unwrap());
            let resp = browsers[i]
                .http
                .get("/", &[("Cookie", &cookie)])
                .await
                .unwrap();
            let owner = cluster
                .owner(&cookie[cookie.rfind(':').unwrap() + 1..])
                .unwrap();
            let want = format!("was{}", &owner[1..]);
            assert_eq!(resp.header("x-server"), Some(want.as_str()));
        }
    }
    assert_eq!(
        wsfo_total(&sims),
        tagged,
        "no $WSFO once the table knows the new owner"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pk48101_a_new_process_keeps_affinity_from_the_saved_table() {
    let (_cluster, sims) = was_cluster().await;
    for graceful in [false, true] {
        let dir = scratch_dir("pk48101");
        let opts = || with_state_dir(&sims, &dir, dir.clone());
        let first = Tether::start_with(opts());
        let (browsers, homes) = new_sessions(&first, 12).await;
        if graceful {
            // A graceful stop saves the table on the way out.
            first.terminate();
        } else {
            // A crash: only what the debounced writer saved (once a second) survives.
            tokio::time::sleep(Duration::from_millis(2_500)).await;
            drop(first);
        }
        assert!(dir.join("state/partitions-shop.tsv").exists());
        let before = wsfo_total(&sims);
        let second = Tether::start_with(opts());
        for (b, home) in browsers.iter().zip(&homes) {
            let cookie = format!("JSESSIONID={}", b.cookie.as_ref().unwrap());
            let resp = second
                .client()
                .get("/", &[("Cookie", &cookie)])
                .await
                .unwrap();
            assert_eq!(
                resp.header("x-server"),
                Some(home.as_str()),
                "graceful={graceful}"
            );
            assert_eq!(count(&resp), 2, "served from the owner's local copy");
        }
        assert_eq!(
            wsfo_total(&sims),
            before,
            "no $WSFO after restart (graceful={graceful})"
        );
        drop(second);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A binary upgrade runs the old and the new process side by side on one `state_dir`. The
/// new one learns a takeover and saves it; the old one's last save, on its way out, must
/// not put the dead owner back, or a crash of the new process would bring PK48101 back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_process_of_an_upgrade_does_not_overwrite_the_new_ones_table() {
    let (cluster, sims) = was_cluster().await;
    let dir = scratch_dir("overlap");
    let opts = |name: &str| with_state_dir(&sims, &dir, dir.join(name));
    let old = Tether::start_with(opts("old"));
    let (browsers, homes) = new_sessions(&old, 12).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let new = Tether::start_with(opts("new"));

    // was1 dies; its sessions, through the new process, move to the clone that takes over.
    sims[0].stop().await;
    let orphans: Vec<String> = (0..homes.len())
        .filter(|&i| homes[i] == "was1")
        .map(|i| format!("JSESSIONID={}", browsers[i].cookie.as_ref().unwrap()))
        .collect();
    assert!(!orphans.is_empty());
    for cookie in &orphans {
        let resp = new.client().get("/", &[("Cookie", cookie)]).await.unwrap();
        assert_eq!(resp.status, 200);
    }
    let owner = cluster.owner("101").unwrap();
    assert_ne!(owner, "c1");
    tokio::time::sleep(Duration::from_millis(2_500)).await; // the new process saved

    old.terminate(); // drains and exits: its last save would hold 101 -> c1
    drop(new); // then the new process crashes (SIGKILL: no last save)
    let tagged = wsfo_total(&sims);
    let third = Tether::start_with(opts("third"));
    for cookie in &orphans {
        let resp = third
            .client()
            .get("/", &[("Cookie", cookie)])
            .await
            .unwrap();
        let partition = &cookie[cookie.rfind(':').unwrap() + 1..];
        let want = format!("was{}", &cluster.owner(partition).unwrap()[1..]);
        assert_eq!(resp.header("x-server"), Some(want.as_str()), "{cookie}");
    }
    assert_eq!(
        wsfo_total(&sims),
        tagged,
        "the saved table knew the new owners: no failover, no $WSFO"
    );
    drop(third);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_sent_private_headers_never_pass() {
    let (_cluster, sims) = was_cluster().await;
    let t = Tether::start(&cluster_yaml(
        &sims,
        "    websphere: { private_headers: true }\n",
    ));
    let (mut browsers, _) = new_sessions(&t, 3).await;
    let b = &mut browsers[0];
    let cookie = format!("JSESSIONID={}", b.cookie.as_ref().unwrap());
    let forged: [(&str, &[u8]); 6] = [
        ("Cookie", cookie.as_bytes()),
        ("$WSFO", b"true"),
        ("$WSPT", b"101=c3"),
        ("$WSRA", b"6.6.6.6"),
        ("$wsis", b"true"),
        ("Host", b"shop.example:8443"),
    ];
    let resp = b.http.request("GET", "/", &forged, b"").await.unwrap();
    assert_eq!(resp.status, 200);
    assert!(
        resp.headers.iter().all(|(n, _)| !n.starts_with("$ws")),
        "{:?}",
        resp.headers
    );
    assert_eq!(wsfo_total(&sims), 0, "a forged $WSFO is not passed on");
    let server = sims
        .iter()
        .find(|s| Some(s.name()) == resp.header("x-server"))
        .unwrap();
    let got = server.last_request_headers();
    let value = |n: &str| {
        got.iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    };
    assert_eq!(
        value("$wsra").as_deref(),
        Some("127.0.0.1"),
        "tether's own, not the forged one"
    );
    assert_eq!(value("$wsis").as_deref(), Some("false"));
    assert_eq!(value("$wssc").as_deref(), Some("http"));
    assert_eq!(value("$wssn").as_deref(), Some("shop.example"));
    assert_eq!(value("$wssp"), Some(t.addr.port().to_string()));
    assert_eq!(value("$wspt"), None);
    assert_eq!(value("$wsfo"), None);
}

/// A rogue cluster member that answers every request with a fixed `$WSPT` value.
async fn rogue_server(wspt: std::sync::Arc<std::sync::Mutex<String>>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let wspt = wspt.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while let Ok(n) = sock.read(&mut chunk).await {
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        let value = wspt.lock().unwrap().clone();
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\nX-Server: rogue\r\n$WSPT: {value}\r\nContent-Length: 3\r\n\r\nok\n"
                        );
                        if sock.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_wspt_values_change_nothing_and_are_counted() {
    let (_cluster, sims) = was_cluster().await;
    let wspt = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let rogue = rogue_server(wspt.clone()).await;
    let mut yaml = cluster_yaml(&sims, "");
    yaml.push_str(&format!(
        "      - {{ name: rogue, address: \"{rogue}\", clone_id: c9 }}\n"
    ));
    let t = Tether::start_with(Opts {
        cluster: yaml,
        log: Some("warn,tether=debug"),
        ..Opts::default()
    });
    // Learn the real table, and find sessions in partitions 101 and 201.
    let (mut browsers, homes) = new_sessions(&t, 12).await;
    let was_sessions: Vec<usize> = (0..12).filter(|&i| homes[i] != "rogue").collect();
    let bad_values = [
        "101=nobody, 201=nobody".to_string(),
        "101=c9, garbage".to_string(),
        "101=c9, 201=c9, <script>".to_string(),
        format!("101=c9, {}", "x".repeat(9_000)),
        (0..1_500)
            .map(|i| format!("{i}=c9"))
            .collect::<Vec<_>>()
            .join(","),
    ];
    for bad in &bad_values {
        *wspt.lock().unwrap() = bad.clone();
        let resp = t
            .client()
            .get("/", &[("Cookie", "JSESSIONID=0000ROGUE:c9")])
            .await
            .unwrap();
        assert_eq!(resp.header("x-server"), Some("rogue"));
        assert!(
            resp.header("$wspt").is_none(),
            "$WSPT never reaches the client"
        );
    }
    for &i in &was_sessions {
        let (status, server) = browsers[i].get("/").await;
        assert_eq!(status, 200);
        assert_eq!(server, homes[i], "the bad values changed no partition");
    }
    assert_eq!(wsfo_total(&sims), 0);
    let log = t.log();
    let refusals = log.matches("$WSPT partly or wholly refused").count();
    assert_eq!(
        refusals,
        bad_values.len(),
        "each bad value is counted:\n{log}"
    );
}

/// A rogue cluster member (clone c9) whose every response carries `headers` `$WSPT` headers,
/// each naming a partition no response named before.
async fn flood_server(headers: usize) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let next = next.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while let Ok(n) = sock.read(&mut chunk).await {
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        let first = next.fetch_add(headers, std::sync::atomic::Ordering::SeqCst);
                        let mut resp = String::from("HTTP/1.1 200 OK\r\nX-Server: rogue\r\n");
                        for i in first..first + headers {
                            resp.push_str(&format!("$WSPT: junk{i}=c9\r\n"));
                        }
                        resp.push_str("Content-Length: 3\r\n\r\nok\n");
                        if sock.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

/// `$WSPT` poisoning: a member floods the table with partitions no request uses, far past
/// `partition_table_max`. Real partitions are still learned into the full table, and the
/// ones sessions use stay through more floods: affinity holds, no `$WSFO`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wspt_flood_never_locks_real_partitions_out() {
    let (_cluster, sims) = was_cluster().await;
    let rogue = flood_server(200).await; // Pingora takes at most 256 headers
    let mut yaml = cluster_yaml(&sims, "    websphere: { partition_table_max: 100 }\n");
    // A backup gets no new sessions: it floods exactly when the test sends it a request.
    yaml.push_str(&format!(
        "      - {{ name: rogue, address: \"{rogue}\", clone_id: c9, backup: true }}\n"
    ));
    let t = Tether::start_with(Opts {
        cluster: yaml,
        admin: true,
        ..Opts::default()
    });
    let flood = || async {
        let resp = t
            .client()
            .get("/", &[("Cookie", "JSESSIONID=0000ROGUE:c9")])
            .await
            .unwrap();
        assert_eq!(resp.header("x-server"), Some("rogue"));
    };
    let table = || async {
        let (status, json) = t.admin("GET", "/status", None, b"").await;
        assert_eq!(status, 200, "{json}");
        json["clusters"][0]["partition_table"].clone()
    };
    for _ in 0..3 {
        flood().await;
    }
    assert_eq!(table().await["size"], 100, "full of junk");

    // Sessions on the real clones: their partitions are learned into the full table.
    let (mut browsers, homes) = new_sessions(&t, 12).await;
    for round in 0..5 {
        for (i, b) in browsers.iter_mut().enumerate() {
            let (status, server) = b.get(&format!("/app/{round}")).await;
            assert_eq!(status, 200);
            assert_eq!(
                server, homes[i],
                "round {round}: the session kept its partition"
            );
        }
        flood().await;
    }
    assert_eq!(wsfo_total(&sims), 0, "no partition was ever unknown");
    let table = table().await;
    assert!(table["size"].as_u64().unwrap() <= 100, "{table}");
    // 200 per flood, or 64 once a response shares one quota: either way, far past the max.
    assert!(table["learned"].as_u64().unwrap() >= 400, "{table}");
}
