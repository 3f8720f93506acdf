//! Failover, server states and `sticky_force` through a real tether process.

mod common;

use common::{server_line, tomcats, Browser, Tether};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_servers_sessions_fail_over_without_a_client_error() {
    let sims = tomcats(3).await;
    let mut cluster = String::from("    recover_after: 60s\n    servers:\n");
    for s in &sims {
        cluster.push_str(&server_line(s, ""));
    }
    let t = Tether::start(&cluster);
    let mut browsers: Vec<Browser> = (0..30).map(|_| Browser::new(&t)).collect();
    let mut home = Vec::new();
    for b in &mut browsers {
        home.push(b.get("/").await.1);
    }
    sims[1].stop().await;
    let before = sims.iter().map(|s| s.requests()).collect::<Vec<_>>();
    for _ in 0..3 {
        for (b, home) in browsers.iter_mut().zip(&home) {
            let (status, server) = b.get("/").await;
            assert_eq!(status, 200, "GET after failover must not fail");
            if home != "tc2" {
                assert_eq!(&server, home, "other sessions keep their server");
            } else {
                assert_ne!(server, "tc2");
            }
        }
    }
    // The dead server is marked down at once: after the first failed connect, its
    // sessions go straight to the failover server (which created new sessions for them).
    let moved = home.iter().filter(|h| *h == "tc2").count();
    assert!(moved > 0);
    let after: u64 = sims.iter().map(|s| s.requests()).sum::<u64>() - before.iter().sum::<u64>();
    assert_eq!(after, 90, "every request was answered exactly once");
    let second_round_sessions: usize = sims[0].session_count() + sims[2].session_count();
    assert_eq!(
        second_round_sessions, 30,
        "each failed-over session made one new session, then stuck"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_gets_no_request() {
    let sims = tomcats(3).await;
    let mut cluster = String::from("    servers:\n");
    cluster.push_str(&server_line(&sims[0], ""));
    cluster.push_str(&server_line(&sims[1], "state: stopped"));
    cluster.push_str(&server_line(&sims[2], ""));
    let t = Tether::start(&cluster);
    let mut c = t.client();
    for i in 0..100 {
        // New sessions, and sessions that name the stopped server.
        let cookie = format!("JSESSIONID=S{i}.tc2");
        let resp = c.get("/", &[("Cookie", &cookie)]).await.unwrap();
        assert_eq!(resp.status, 200);
        let resp = c.get("/", &[]).await.unwrap();
        assert_eq!(resp.status, 200);
    }
    assert_eq!(sims[1].requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_server_gets_only_its_own_sessions() {
    let sims = tomcats(3).await;
    let mut cluster = String::from("    servers:\n");
    cluster.push_str(&server_line(&sims[0], ""));
    cluster.push_str(&server_line(&sims[1], ""));
    cluster.push_str(&server_line(&sims[2], "state: draining"));
    let t = Tether::start(&cluster);
    let mut c = t.client();
    for _ in 0..60 {
        let resp = c.get("/", &[]).await.unwrap();
        assert_ne!(
            resp.header("x-server"),
            Some("tc3"),
            "no new session on a draining server"
        );
    }
    assert_eq!(sims[2].requests(), 0);
    for i in 0..20 {
        let cookie = format!("JSESSIONID=OWN{i}.tc3");
        let resp = c.get("/", &[("Cookie", &cookie)]).await.unwrap();
        assert_eq!(
            resp.header("x-server"),
            Some("tc3"),
            "its own sessions still reach it"
        );
    }
    assert_eq!(sims[2].requests(), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sticky_force_answers_503_when_the_sessions_server_is_down() {
    let sims = tomcats(2).await;
    let mut cluster =
        String::from("    sticky_force: true\n    recover_after: 60s\n    servers:\n");
    for s in &sims {
        cluster.push_str(&server_line(s, ""));
    }
    let t = Tether::start(&cluster);
    let mut c = t.client();
    let ok = c.get("/", &[("Cookie", "JSESSIONID=A.tc1")]).await.unwrap();
    assert_eq!(ok.header("x-server"), Some("tc1"));
    sims[0].stop().await;
    for _ in 0..3 {
        let resp = c.get("/", &[("Cookie", "JSESSIONID=A.tc1")]).await.unwrap();
        assert_eq!(resp.status, 503);
        assert_eq!(
            resp.header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert!(
            resp.body_str().contains("server holding this session"),
            "{}",
            resp.body_str()
        );
    }
    assert_eq!(sims[1].requests(), 0, "no failover with sticky_force");
    // New sessions still work.
    let resp = c.get("/", &[]).await.unwrap();
    assert_eq!(resp.header("x-server"), Some("tc2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_comes_back_is_probed_and_used_again() {
    let sims = tomcats(2).await;
    let mut cluster = String::from("    recover_after: 300ms\n    servers:\n");
    for s in &sims {
        cluster.push_str(&server_line(s, ""));
    }
    let t = Tether::start(&cluster);
    let mut c = t.client();
    sims[0].stop().await;
    for _ in 0..10 {
        assert_eq!(
            c.get("/", &[]).await.unwrap().header("x-server"),
            Some("tc2")
        );
    }
    sims[0].restart().await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut seen_tc1 = 0;
    for _ in 0..10 {
        seen_tc1 += (c.get("/", &[]).await.unwrap().header("x-server") == Some("tc1")) as u32;
    }
    assert!(seen_tc1 >= 4, "tc1 is back in rotation ({seen_tc1}/10)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_follows_redirect_then_domain() {
    let sims = tomcats(4).await;
    let mut cluster = String::from("    recover_after: 60s\n    servers:\n");
    cluster.push_str(&server_line(&sims[0], "redirect: tc4"));
    cluster.push_str(&server_line(&sims[1], "domain: rack1"));
    cluster.push_str(&server_line(&sims[2], "domain: rack1"));
    cluster.push_str(&server_line(&sims[3], ""));
    let t = Tether::start(&cluster);
    let mut c = t.client();
    sims[0].stop().await;
    sims[1].stop().await;
    for i in 0..10 {
        let a = c
            .get("/", &[("Cookie", &format!("JSESSIONID=A{i}.tc1"))])
            .await
            .unwrap();
        assert_eq!(a.header("x-server"), Some("tc4"), "tc1 redirects to tc4");
        let b = c
            .get("/", &[("Cookie", &format!("JSESSIONID=B{i}.tc2"))])
            .await
            .unwrap();
        assert_eq!(
            b.header("x-server"),
            Some("tc3"),
            "tc2 fails over inside rack1"
        );
    }
}
