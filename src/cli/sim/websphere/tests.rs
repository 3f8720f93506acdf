//! End-to-end tests of `WebSphereSim`: partition ids, `$WSPT`, and what `$WSFO` does
//! (or fails to do) to session data and partition ownership.

use std::io;

use tokio::net::TcpStream;

use super::{random_key, session_key, WasCluster, WebSphereSim};
use crate::cli::sim::{HttpClient, Response};

const P1: &str = "7329011";
const P2: &str = "-184020";
const P3: &str = "55";

fn count(resp: &Response) -> u64 {
    resp.header("x-session-count").unwrap().parse().unwrap()
}

fn key(resp: &Response) -> String {
    resp.header("x-session-id").unwrap().to_string()
}

async fn get(sim: &WebSphereSim, headers: &[(&str, &str)]) -> Response {
    HttpClient::new(sim.addr())
        .get("/app", headers)
        .await
        .unwrap()
}

/// Cluster with clone A owning P1 and P2, clone B owning P3.
async fn two_clones() -> (WasCluster, WebSphereSim, WebSphereSim) {
    let cluster = WasCluster::new();
    let a = WebSphereSim::start(&cluster, "was-a", "cloneA", &[P1, P2]);
    let b = WebSphereSim::start(&cluster, "was-b", "cloneB", &[P3]);
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    (cluster, a, b)
}

#[test]
fn ids_have_websphere_shape() {
    let ids = crate::cli::sim::session::IdGen::new();
    let (k1, k2) = (random_key(&ids), random_key(&ids));
    assert_ne!(k1, k2);
    assert_eq!(k1.len(), 27);
    assert!(k1.starts_with("0000"));
    let chars_ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    assert!(k1.chars().all(chars_ok), "{k1}");
    assert_eq!(session_key("0000abc:7329011:cloneB"), "0000abc");
    assert_eq!(session_key("0000abc"), "0000abc");
}

#[tokio::test]
async fn new_session_names_an_owned_partition_and_wspt_lists_them() {
    let (_cluster, a, _b) = two_clones().await;
    let first = get(&a, &[]).await;
    let id = first.set_cookie("JSESSIONID").unwrap();
    let (k, partition) = id.split_once(':').unwrap();
    assert_eq!((k.len(), first.header("x-session-id")), (27, Some(k)));
    assert_eq!(
        first.header("$wspt"),
        Some("7329011=cloneA, -184020=cloneA")
    );
    assert_eq!(first.header("x-server"), Some("was-a"));
    assert_eq!(
        first.body_str(),
        format!("server=was-a session={k} count=1\n")
    );
    // New sessions go round robin over the owned partitions.
    let second = get(&a, &[]).await.set_cookie("JSESSIONID").unwrap();
    let mut seen = [partition, second.split_once(':').unwrap().1];
    seen.sort();
    assert_eq!(seen, [P2, P1]);
    assert_eq!(a.partitions(), [P1, P2]);

    let health = HttpClient::new(a.addr()).get("/health", &[]).await.unwrap();
    assert_eq!((health.body_str(), health.header("$wspt")), ("ok\n", None));
    assert_eq!(a.requests(), 2);
}

#[tokio::test]
async fn sticky_requests_count_up_from_the_local_copy() {
    let (_cluster, a, _b) = two_clones().await;
    let id = get(&a, &[]).await.set_cookie("JSESSIONID").unwrap();
    let cookie = format!("theme=dark; JSESSIONID={id}");
    for expected in [2, 3] {
        let resp = get(&a, &[("Cookie", &cookie)]).await;
        assert_eq!(
            (count(&resp), resp.set_cookie("JSESSIONID")),
            (expected, None)
        );
    }
    let path = format!("/cart;jsessionid={id}?item=1");
    let resp = HttpClient::new(a.addr()).get(&path, &[]).await.unwrap();
    assert_eq!(
        (key(&resp), count(&resp)),
        (session_key(&id).to_string(), 4)
    );
    assert_eq!((a.requests(), a.wsfo_received()), (4, 0));
}

#[tokio::test]
async fn failover_without_wsfo_loses_the_session_and_with_it_takes_over() {
    let (cluster, a, b) = two_clones().await;
    let id = get(&a, &[]).await.set_cookie("JSESSIONID").unwrap();
    let partition = id.split_once(':').unwrap().1.to_string();
    let cookie = format!("JSESSIONID={id}");
    assert_eq!(count(&get(&a, &[("Cookie", &cookie)]).await), 2);

    // B never saw the session and was not told to look in the replica: data lost.
    let lost = get(&b, &[("Cookie", &cookie)]).await;
    assert_eq!(count(&lost), 1);
    assert_ne!(key(&lost), session_key(&id));
    assert!(lost.set_cookie("JSESSIONID").unwrap().ends_with(":55"));
    assert_eq!(cluster.owner(&partition).as_deref(), Some("cloneA"));

    // With $WSFO B recovers the replica and announces the partition right away.
    let recovered = get(&b, &[("Cookie", &cookie), ("$WSFO", "true")]).await;
    assert_eq!(
        (key(&recovered), count(&recovered)),
        (session_key(&id).into(), 3)
    );
    assert_eq!(recovered.set_cookie("JSESSIONID"), None);
    let wspt = recovered.header("$wspt").unwrap();
    assert_eq!(wspt, format!("55=cloneB, {partition}=cloneB"));
    assert_eq!(cluster.owner(&partition).as_deref(), Some("cloneB"));
    assert_eq!((b.wsfo_received(), a.wsfo_received()), (1, 0));
    assert!(!a.partitions().contains(&partition));
    let a_wspt = get(&a, &[]).await;
    assert!(!a_wspt.header("$wspt").unwrap().contains(&partition));

    // Sticky on B from now on, served from B's fresh local copy.
    assert_eq!(count(&get(&b, &[("Cookie", &cookie)]).await), 4);
    // A still holds its stale copy: without $WSFO it answers from it (count 2 + 1)...
    assert_eq!(count(&get(&a, &[("Cookie", &cookie)]).await), 3);
}

#[tokio::test]
async fn every_request_tagged_churns_ownership() {
    // IBM PM30968: the plug-in tagged every request with $WSFO. Each tagged request moves
    // the partition, which a test of the proxy can detect through wsfo_received and owner.
    let (cluster, a, b) = two_clones().await;
    let id = get(&a, &[]).await.set_cookie("JSESSIONID").unwrap();
    let partition = id.split_once(':').unwrap().1.to_string();
    let cookie = format!("JSESSIONID={id}");
    let tagged = [("Cookie", cookie.as_str()), ("$wsfo", "1")];
    assert_eq!(count(&get(&b, &tagged).await), 2);
    assert_eq!(count(&get(&a, &tagged).await), 3);
    assert_eq!(cluster.owner(&partition).as_deref(), Some("cloneA"));
    assert_eq!((a.wsfo_received(), b.wsfo_received()), (1, 1));
    // A's own partitions come first, the re-taken one last.
    assert_eq!(a.partitions().last(), Some(&partition));
}

#[tokio::test]
async fn wsfo_for_an_unknown_session_creates_one_without_takeover() {
    let (cluster, a, b) = two_clones().await;
    let resp = get(
        &b,
        &[("Cookie", "JSESSIONID=0000nope:7329011"), ("$WSFO", "x")],
    )
    .await;
    assert_eq!(count(&resp), 1);
    assert!(resp.set_cookie("JSESSIONID").unwrap().ends_with(":55"));
    assert_eq!(
        (cluster.owner(P1).as_deref(), b.wsfo_received()),
        (Some("cloneA"), 1)
    );
    assert_eq!(a.partitions(), [P1, P2]);
}

#[tokio::test]
async fn clone_without_partitions_uses_its_clone_id_and_sends_no_wspt() {
    let cluster = WasCluster::new();
    let c = WebSphereSim::start(&cluster, "was-c", "cloneC", &[])
        .await
        .unwrap();
    let resp = get(&c, &[]).await;
    assert!(resp.set_cookie("JSESSIONID").unwrap().ends_with(":cloneC"));
    assert_eq!(resp.header("$wspt"), None);
    assert!(c.partitions().is_empty() && cluster.owner("cloneC").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_empties_the_local_copy_but_keeps_ownership_and_replica() {
    let (cluster, a, _b) = two_clones().await;
    let addr = a.addr();
    let id = get(&a, &[]).await.set_cookie("JSESSIONID").unwrap();
    let cookie = format!("JSESSIONID={id}");
    assert_eq!(count(&get(&a, &[("Cookie", &cookie)]).await), 2);

    a.stop().await;
    assert!(!a.is_running());
    let refused = TcpStream::connect(addr).await.unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
    a.restart().await.unwrap();
    assert!(a.is_running() && a.addr() == addr);
    assert_eq!(cluster.owner(P1).as_deref(), Some("cloneA"));
    assert_eq!(a.partitions(), [P1, P2]);

    // The restarted JVM forgot the session, but it still owns the session's partition,
    // so it serves the session from the replica.
    let reloaded = get(&a, &[("Cookie", &cookie)]).await;
    assert_eq!(count(&reloaded), 3);
    assert_eq!(key(&reloaded), session_key(&id));
    let recovered = get(&a, &[("Cookie", &cookie), ("$WSFO", "true")]).await;
    assert_eq!(count(&recovered), 4);
    assert_eq!(a.wsfo_received(), 1);
    assert!(a.last_request_headers().iter().any(|(n, _)| n == "$wsfo"));
    a.stop().await;
}
