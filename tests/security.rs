//! Security fixes of the hardening round: plugins across reloads, the admin API's token
//! across reloads, and headers a client must not be able to set for the servers.

mod common;

use common::lookup::Lookup;
use common::{server_line, tomcats, Opts, Tether};
use tether::cli::sim::send_raw;

/// `shop` (tc1) and `other` (tc2), with a listener `route_lookup` keyed on `X-User`.
fn two_clusters_with_lookup(sims: &[tether::cli::sim::TomcatSim], lookup: &Lookup) -> Tether {
    let cluster = format!(
        "    servers:\n{}  - name: other\n    servers:\n{}",
        server_line(&sims[0], ""),
        server_line(&sims[1], "")
    );
    let plugin = format!(
        "      - name: route_lookup\n        key: {{ header: X-User }}\n        url: \"http://{}/route/{{key}}\"\n        answer: {{ header: X-Route }}\n",
        lookup.addr()
    );
    Tether::start_with(Opts {
        cluster,
        listener_plugins: plugin,
        admin: true,
        ..Opts::default()
    })
}

/// The config's `clusters:` section rewritten by `f` (cluster blocks, in order).
fn rewrite_clusters(t: &Tether, f: impl Fn(Vec<String>) -> Vec<String>) {
    let text = std::fs::read_to_string(t.config_path()).unwrap();
    let (head, clusters) = text.split_once("clusters:\n").unwrap();
    let mut blocks: Vec<String> = Vec::new();
    for line in clusters.lines() {
        if line.starts_with("  - name:") {
            blocks.push(String::new());
        }
        let b = blocks.last_mut().unwrap();
        b.push_str(line);
        b.push('\n');
    }
    let new = format!("{head}clusters:\n{}", f(blocks).concat());
    std::fs::write(t.config_path(), new).unwrap();
}

async fn as_user(t: &Tether, user: &str) -> (u16, String) {
    let r = t.client().get("/", &[("X-User", user)]).await.unwrap();
    (r.status, r.header("x-server").unwrap_or("").to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_reorders_or_removes_clusters_never_sends_users_to_the_wrong_one() {
    let sims = tomcats(2).await;
    let lookup = Lookup::start(&[("001", "other")]).await;
    let t = two_clusters_with_lookup(&sims, &lookup);
    assert_eq!(as_user(&t, "001").await, (200, "tc2".into()));

    // Same plugin settings, clusters in the other order: the cached answer named `other`
    // by its old index, which is now `shop`.
    rewrite_clusters(&t, |mut b| {
        b.reverse();
        b
    });
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_eq!(status, 200, "{json}");
    for _ in 0..3 {
        assert_eq!(
            as_user(&t, "001").await,
            (200, "tc2".into()),
            "still `other`"
        );
    }

    // `other` removed: the API's answer names nothing the config has, so the request is
    // balanced in the listener's cluster (before the fix: index out of bounds, a panicked
    // request task and no answer at all).
    rewrite_clusters(&t, |b| {
        b.into_iter()
            .filter(|c| !c.contains("name: other"))
            .collect()
    });
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_eq!(status, 200, "{json}");
    for _ in 0..3 {
        assert_eq!(as_user(&t, "001").await, (200, "tc1".into()));
    }
    assert!(!t.log().contains("panicked"), "{}", t.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_admin_section_on_reload_does_not_open_the_admin_api() {
    let sims = tomcats(2).await;
    let cluster = format!(
        "    servers:\n{}{}",
        server_line(&sims[0], ""),
        server_line(&sims[1], "")
    );
    let t = Tether::start_with(Opts {
        cluster,
        admin: true,
        admin_token: Some("s3cret"),
        log: Some("warn,tether=info"),
        ..Opts::default()
    });
    let text = std::fs::read_to_string(t.config_path()).unwrap();
    let start = text.find("admin:\n").unwrap();
    let end = text.find("listeners:\n").unwrap();
    std::fs::write(
        t.config_path(),
        format!("{}{}", &text[..start], &text[end..]),
    )
    .unwrap();
    let (status, json) = t.admin("POST", "/reload", Some("s3cret"), b"").await;
    assert_eq!(status, 200, "{json}");
    assert!(
        json["needs_upgrade"]
            .to_string()
            .contains("keeps the token"),
        "the reply says the token stays: {json}"
    );
    // Without the token: still refused, and the server is not stopped.
    let (status, _) = t
        .admin("POST", "/clusters/shop/servers/tc1/stop", None, b"")
        .await;
    assert_eq!(status, 401);
    assert_eq!(t.server_status(Some("s3cret"), "tc1").await.0, "active");
    // A different token in a reloaded file does not replace the running one either.
    let other = t.dir.join("other.token");
    std::fs::write(&other, "other\n").unwrap();
    let text = std::fs::read_to_string(t.config_path()).unwrap();
    let admin = t.admin.unwrap();
    std::fs::write(
        t.config_path(),
        text.replace(
            "listeners:\n",
            &format!(
                "admin:\n  address: \"{admin}\"\n  token_file: {}\nlisteners:\n",
                other.display()
            ),
        ),
    )
    .unwrap();
    assert_eq!(t.admin("POST", "/reload", Some("s3cret"), b"").await.0, 200);
    assert_eq!(t.admin("GET", "/status", Some("other"), b"").await.0, 401);
    assert_eq!(t.admin("GET", "/status", Some("s3cret"), b"").await.0, 200);
}

/// The headers tc1 saw on its last request, as text.
fn seen(sim: &tether::cli::sim::TomcatSim, name: &str) -> Option<String> {
    sim.last_request_headers()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_and_forwarded_host_are_checked() {
    let sims = tomcats(1).await;
    let t = Tether::start(&format!("    servers:\n{}", server_line(&sims[0], "")));
    // HTTP/1.0 without Host: served, but the client's X-Forwarded-Host does not pass.
    let r = send_raw(
        t.addr,
        b"GET / HTTP/1.0\r\nX-Forwarded-Host: evil.example\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(seen(&sims[0], "x-forwarded-host"), None);
    // With Host: X-Forwarded-Host is this hop's Host.
    let r = send_raw(
        t.addr,
        b"GET / HTTP/1.0\r\nHost: shop.example\r\nX-Forwarded-Host: evil.example\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        seen(&sims[0], "x-forwarded-host").as_deref(),
        Some("shop.example")
    );
    // HTTP/1.1 without Host, or with two: 400, closed, and nothing reaches the server.
    let before = sims[0].requests();
    for raw in [
        &b"GET / HTTP/1.1\r\nX-Forwarded-Host: evil.example\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    ] {
        let r = send_raw(t.addr, raw).await.unwrap();
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(raw));
        assert_eq!(r.header("connection"), Some("close"));
    }
    assert_eq!(sims[0].requests(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_content_length_reaches_the_server_as_one() {
    let sims = tomcats(1).await;
    let t = Tether::start(&format!("    servers:\n{}", server_line(&sims[0], "")));
    for raw in [
        &b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\nConnection: close\r\n\r\nhello"[..],
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
    ] {
        let r = send_raw(t.addr, raw).await.unwrap();
        assert_eq!(r.status, 200);
        let lengths: Vec<String> = sims[0]
            .last_request_headers()
            .into_iter()
            .filter(|(n, _)| n == "content-length")
            .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
            .collect();
        assert_eq!(lengths, ["5"]);
    }
}
