//! The demo's WebSphere scenario: the partition table learned from `$WSPT`, affinity with
//! no `$WSFO`, a clone killed, `$WSFO` failover keeping the session, the table updated.

use super::tomcat::{line, wait_ready};
use crate::cli::sim::{HttpClient, WasCluster, WebSphereSim};
use crate::state::snapshot::SharedSnapshot;
use std::net::SocketAddr;

/// A session id of the scenario, for the `curl` lines.
static SAMPLE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `curl` lines a person can try against the WebSphere listener.
pub fn print_curls(addr: SocketAddr) {
    let sample = SAMPLE
        .get()
        .map(String::as_str)
        .unwrap_or("0000ABC:7329011");
    println!(
        "  curl -i http://{addr}/                                     # a new WebSphere session"
    );
    println!("  curl -i -b 'JSESSIONID={sample}' http://{addr}/   # routed by the partition table");
    println!("  curl -i -H '$WSFO: true' http://{addr}/   # a client's $WS* headers never pass");
}

/// One WebSphere session: its connection, cookie, last server and count.
struct Session {
    http: HttpClient,
    id: String,
    server: String,
    count: u64,
}

impl Session {
    async fn get(&mut self) -> Result<(), String> {
        let cookie = format!("JSESSIONID={}", self.id);
        let headers: &[(&str, &str)] = if self.id.is_empty() {
            &[]
        } else {
            &[("Cookie", &cookie)]
        };
        let resp = self
            .http
            .get("/app", headers)
            .await
            .map_err(|e| e.to_string())?;
        if resp.status != 200 {
            return Err(format!("HTTP {}", resp.status));
        }
        if let Some(id) = resp.set_cookie("JSESSIONID") {
            self.id = id;
        }
        self.server = resp.header("x-server").unwrap_or("?").to_string();
        self.count = resp
            .header("x-session-count")
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        Ok(())
    }
}

fn wsfo(clones: &[WebSphereSim]) -> u64 {
    clones.iter().map(|c| c.wsfo_received()).sum()
}

/// The partition table as tether holds it, for the partitions the clones own at start.
fn print_table(snapshot: &SharedSnapshot, clones: &[WebSphereSim], was: &WasCluster) {
    let snap = snapshot.load();
    let Some(router) = snap.clusters.iter().find(|r| r.is_websphere()) else {
        return;
    };
    let size = router.partitions().map_or(0, |t| t.len());
    println!("  tether's partition table ({size} entries):");
    let mut partitions: Vec<String> = clones.iter().flat_map(|c| c.partitions()).collect();
    partitions.sort();
    for p in partitions {
        let known = router.partition_owner(p.as_bytes()).unwrap_or("-");
        let owner = was.owner(&p).unwrap_or_default();
        println!("    partition {p:>9} -> {known:<9} (owner in the cluster: {owner})");
    }
}

pub async fn run(
    addr: SocketAddr,
    was: &WasCluster,
    clones: &[WebSphereSim],
    snapshot: &SharedSnapshot,
) {
    wait_ready(addr).await;
    println!("\n5. WebSphere: 12 new sessions; every response carries $WSPT, tether learns it");
    let mut sessions: Vec<Session> = (0..12)
        .map(|_| Session {
            http: HttpClient::new(addr),
            id: String::new(),
            server: String::new(),
            count: 0,
        })
        .collect();
    for s in &mut sessions {
        let _ = s.get().await;
    }
    print_table(snapshot, clones, was);
    if let Some(s) = sessions.first() {
        SAMPLE.get_or_init(|| s.id.clone());
        line("a session id (cache id + id : partition)", &s.id);
    }

    println!("\n6. each session sends 5 more requests");
    let homes: Vec<String> = sessions.iter().map(|s| s.server.clone()).collect();
    let mut at_owner = 0;
    for (s, home) in sessions.iter_mut().zip(&homes) {
        for _ in 0..5 {
            if s.get().await.is_ok() && s.server == *home {
                at_owner += 1;
            }
        }
    }
    line(
        "requests that reached the partition's owner",
        format!("{at_owner}/60"),
    );
    line(
        "requests carrying $WSFO (PM30968 would tag all)",
        wsfo(clones),
    );

    let victim = &clones[0];
    println!(
        "\n7. {} is killed; its sessions fail over with $WSFO",
        victim.name()
    );
    victim.stop().await;
    let (mut errors, mut kept) = (0, 0);
    let mut moved = 0;
    for (s, home) in sessions.iter_mut().zip(&homes) {
        if home != victim.name() {
            continue;
        }
        moved += 1;
        let before = s.count;
        match s.get().await {
            Ok(()) if s.count == before + 1 => kept += 1,
            Ok(()) => {}
            Err(_) => errors += 1,
        }
    }
    line("client errors", errors);
    line(
        "sessions whose data survived (from the replica)",
        format!("{kept}/{moved}"),
    );
    line("requests that carried $WSFO", wsfo(clones));
    print_table(snapshot, clones, was);

    println!("\n8. the same sessions again: the table names the new owner, no $WSFO");
    let tagged = wsfo(clones);
    for (s, home) in sessions.iter_mut().zip(&homes) {
        if home == victim.name() {
            let _ = s.get().await;
        }
    }
    line("new $WSFO tags", wsfo(clones) - tagged);
}
