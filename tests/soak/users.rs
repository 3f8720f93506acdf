//! The soak's users: each keeps a session on one cluster over one protocol, sends its
//! requests alternately through instance a and b (the fleet must agree on the session's
//! server), starts a new session every 50 requests, and has every answer judged.

use crate::clients::{connector, Proto, Way, H2};
use crate::fleet::Fleet;
use crate::truth::{judge, Asked, Cluster, Session, Stats, Truth};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tether::cli::sim::HttpClient;
use tokio::task::JoinHandle;

/// Requests per session before the user comes back as a new visitor.
const SESSION_LENGTH: u64 = 50;

/// `per_kind` users for each protocol and cluster, each waiting `pace` between requests.
pub fn start(
    fleet: &Arc<Fleet>,
    truth: &Arc<Truth>,
    stats: &Arc<Stats>,
    stop: &Arc<AtomicBool>,
    per_kind: usize,
    pace: Duration,
) -> Vec<JoinHandle<()>> {
    let ca = fleet.pki.path("ca.pem");
    let tomcat = Arc::new(Cluster {
        name: "tomcat",
        prefix: "",
        servers: fleet.tomcats.iter().map(|t| t.name().to_string()).collect(),
        websphere: None,
    });
    let was = Arc::new(Cluster {
        name: "was",
        prefix: "/was",
        servers: fleet.clones.iter().map(|c| c.name().to_string()).collect(),
        websphere: Some((
            fleet.was_cluster.clone(),
            fleet
                .clones
                .iter()
                .map(|c| (c.name().to_string(), c.clone_id().to_string()))
                .collect(),
        )),
    });
    // HTTP/2: one connection per instance, shared by every HTTP/2 user.
    let h2 = [
        H2::new(fleet.instances[0].tls, &ca),
        H2::new(fleet.instances[1].tls, &ca),
    ];
    let mut users = Vec::new();
    let mut id = 0;
    for proto in [Proto::Http1, Proto::Http1Tls, Proto::Http2] {
        for cluster in [&tomcat, &was] {
            for _ in 0..per_kind {
                id += 1;
                let ways = [0, 1].map(|i| {
                    let inst = &fleet.instances[i];
                    match proto {
                        Proto::Http1 => Way::Http1(HttpClient::new(inst.plain)),
                        Proto::Http1Tls => Way::Http1(HttpClient::tls(
                            inst.tls,
                            connector(&ca, b"\x08http/1.1"),
                            "localhost",
                        )),
                        Proto::Http2 => Way::Http2(h2[i].clone()),
                    }
                });
                users.push(tokio::spawn(user(
                    id,
                    proto,
                    cluster.clone(),
                    ways,
                    truth.clone(),
                    stats.clone(),
                    stop.clone(),
                    pace,
                )));
            }
        }
    }
    users
}

#[allow(clippy::too_many_arguments)]
async fn user(
    id: usize,
    proto: Proto,
    cluster: Arc<Cluster>,
    mut ways: [Way; 2],
    truth: Arc<Truth>,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    pace: Duration,
) {
    let mut session: Option<Session> = None;
    let mut n = 0u64;
    // Users start spread over the first pace.
    tokio::time::sleep(pace * (id as u32 % 10) / 10).await;
    while !stop.load(Relaxed) {
        n += 1;
        if n.is_multiple_of(SESSION_LENGTH) {
            session = None;
        }
        let via = (n % 2) as usize;
        let path = format!("{}/app/{id}/{n}", cluster.prefix);
        let from = Instant::now();
        let cookie = session.as_ref().map(|s| s.cookie.clone());
        let owner = cookie.as_deref().and_then(|c| cluster.partition_owner(c));
        let (result, resent) = ways[via].get(&path, cookie.as_deref()).await;
        let to = Instant::now();
        let who = format!(
            "user {id} ({}, {}) via {}",
            proto.name(),
            cluster.name,
            ["a", "b"][via]
        );
        let asked = Asked {
            cluster: &cluster,
            from,
            to,
            who: &who,
            resent,
            owner,
        };
        judge(&truth, &stats, &asked, &mut session, result);
        tokio::time::sleep(pace).await;
    }
}
