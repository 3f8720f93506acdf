//! The admin API over a real socket: states, weights, reload, token, malformed calls.

mod common;

use common::{new_sessions, tomcats, Opts, Tether};

const TOKEN: &str = "s3cret-token";
const AUTH: Option<&str> = Some(TOKEN);

fn cluster(sims: &[tether::cli::sim::TomcatSim]) -> String {
    common::cluster_yaml("", sims)
}

fn start(cluster: String) -> Tether {
    Tether::start_with(Opts {
        cluster,
        admin: true,
        admin_token: Some(TOKEN),
        log: Some("warn,tether=info"),
        ..Opts::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_keeps_sticky_requests_and_stops_new_sessions() {
    let sims = tomcats(3).await;
    let t = start(cluster(&sims));
    let (status, json) = t
        .admin("POST", "/clusters/shop/servers/tc3/drain", AUTH, b"")
        .await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(json["state"], "draining");
    assert_eq!(json["previous"], "active");
    let seen = new_sessions(&t, 30).await;
    assert_eq!(seen.get("tc3"), None, "{seen:?}");
    let mut c = t.client();
    for i in 0..10 {
        let resp = c
            .get("/", &[("Cookie", &format!("JSESSIONID=S{i}.tc3"))])
            .await
            .unwrap();
        assert_eq!(
            resp.header("x-server"),
            Some("tc3"),
            "its own sessions still reach it"
        );
    }
    assert!(
        t.log().contains("set shop/tc3 to draining (was active)"),
        "{}",
        t.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_sends_nothing_and_activate_brings_it_back() {
    let sims = tomcats(3).await;
    let t = start(cluster(&sims));
    let (status, _) = t
        .admin("POST", "/clusters/shop/servers/tc2/stop", AUTH, b"")
        .await;
    assert_eq!(status, 200);
    let mut c = t.client();
    for i in 0..20 {
        let resp = c
            .get("/", &[("Cookie", &format!("JSESSIONID=S{i}.tc2"))])
            .await
            .unwrap();
        assert_eq!(resp.status, 200);
        assert_ne!(resp.header("x-server"), Some("tc2"));
    }
    new_sessions(&t, 20).await;
    assert_eq!(sims[1].requests(), 0, "a stopped server gets nothing");
    let (status, _) = t
        .admin("POST", "/clusters/shop/servers/tc2/activate", AUTH, b"")
        .await;
    assert_eq!(status, 200);
    let seen = new_sessions(&t, 30).await;
    assert_eq!(seen.get("tc2"), Some(&10), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weight_change_shifts_new_sessions() {
    let sims = tomcats(3).await;
    let t = start(cluster(&sims));
    let (status, json) = t
        .admin("PUT", "/clusters/shop/servers/tc1/weight", AUTH, b"3")
        .await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(
        (json["weight"].as_u64(), json["previous"].as_u64()),
        (Some(3), Some(1))
    );
    let seen = new_sessions(&t, 50).await;
    assert_eq!(
        (seen["tc1"], seen["tc2"], seen["tc3"]),
        (30, 10, 10),
        "3:1:1 over 50"
    );
    assert_eq!(t.server_status(AUTH, "tc1").await.2, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_required() {
    let sims = tomcats(1).await;
    let t = start(cluster(&sims));
    for token in [
        None,
        Some("wrong"),
        Some("s3cret-toke"),
        Some("s3cret-token-and-more"),
    ] {
        let (status, json) = t.admin("GET", "/status", token, b"").await;
        assert_eq!(status, 401, "{token:?}");
        assert!(json["error"].is_string());
        let (status, _) = t
            .admin("POST", "/clusters/shop/servers/tc1/stop", token, b"")
            .await;
        assert_eq!(status, 401);
    }
    assert_eq!(
        t.server_status(AUTH, "tc1").await.0,
        "active",
        "refused calls change nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_calls_get_4xx_and_change_nothing() {
    let sims = tomcats(2).await;
    let t = start(cluster(&sims));
    let before = t.admin("GET", "/status", AUTH, b"").await.1;
    let big = vec![b'1'; 5000];
    let cases: &[(&str, &str, &[u8], u16)] = &[
        ("POST", "/clusters/nope/servers/tc1/drain", b"", 404),
        ("POST", "/clusters/shop/servers/nope/drain", b"", 404),
        ("POST", "/clusters/shop/servers/tc1/explode", b"", 404),
        ("PUT", "/clusters/shop/servers/tc1/weight", b"abc", 400),
        ("PUT", "/clusters/shop/servers/tc1/weight", b"0", 400),
        ("PUT", "/clusters/shop/servers/tc1/weight", b"1001", 400),
        ("PUT", "/clusters/shop/servers/tc1/weight", b"-2", 400),
        ("PUT", "/clusters/shop/servers/tc1/weight", b"2.5", 400),
        ("PUT", "/clusters/shop/servers/tc1/weight", b"", 400),
        ("PUT", "/clusters/shop/servers/tc1/weight", &big, 413),
        ("PUT", "/clusters/shop/servers/nope/weight", b"2", 404),
        ("GET", "/clusters/shop/servers/tc1/drain", b"", 405),
        ("DELETE", "/status", b"", 405),
        ("GET", "/nothing/here", b"", 404),
        // `/` is the console's (a redirect to `/ui`); other paths are no endpoint.
        ("GET", "/ui/nothing", b"", 404),
    ];
    for (method, path, body, want) in cases {
        let (status, json) = t.admin(method, path, AUTH, body).await;
        assert_eq!(status, *want, "{method} {path}: {json}");
        assert!(
            json["error"].is_string(),
            "{method} {path}: a JSON error body: {json}"
        );
    }
    let after = t.admin("GET", "/status", AUTH, b"").await.1;
    assert_eq!(before, after, "nothing changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_applies_a_good_file_keeps_runtime_changes_and_rejects_a_bad_one() {
    let sims = tomcats(3).await;
    let t = start(cluster(&sims));
    t.admin("POST", "/clusters/shop/servers/tc3/drain", AUTH, b"")
        .await;
    // The new file changes tc1's weight and removes nothing.
    let text = std::fs::read_to_string(t.config_path()).unwrap();
    let heavier = text.replacen(
        &format!("{}\" }}", sims[0].addr()),
        &format!("{}\", weight: 4 }}", sims[0].addr()),
        1,
    );
    assert_ne!(text, heavier);
    std::fs::write(t.config_path(), &heavier).unwrap();
    let (status, json) = t.admin("POST", "/reload", AUTH, b"").await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(json["needs_upgrade"], serde_json::json!([]));
    assert_eq!(
        t.server_status(AUTH, "tc1").await.2,
        4,
        "the new weight applies"
    );
    assert_eq!(
        t.server_status(AUTH, "tc3").await.0,
        "draining",
        "runtime drain survives"
    );
    let seen = new_sessions(&t, 50).await;
    assert_eq!(
        (seen["tc1"], seen["tc2"]),
        (40, 10),
        "4:1, tc3 draining: {seen:?}"
    );

    std::fs::write(t.config_path(), heavier.replace("weight: 4", "weight: 0")).unwrap();
    let (status, json) = t.admin("POST", "/reload", AUTH, b"").await;
    assert_eq!(status, 400, "{json}");
    let errors = json["errors"].as_array().unwrap();
    assert!(
        errors
            .iter()
            .any(|e| e.as_str().unwrap().contains("weight")),
        "{json}"
    );
    assert_eq!(
        t.server_status(AUTH, "tc1").await.2,
        4,
        "the running config stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_time_overrides_are_shown_logged_and_can_be_dropped() {
    let sims = tomcats(2).await;
    let t = Tether::start_with(Opts {
        cluster: common::cluster_yaml("", &sims),
        admin: true,
        log: Some("warn,tether=info"),
        ..Opts::default()
    });
    let weight = |json: &serde_json::Value, name: &str| {
        json["clusters"][0]["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        t.admin("PUT", "/clusters/shop/servers/tc1/weight", None, b"3")
            .await
            .0,
        200
    );
    // The file now says 5 for tc1: the run-time 3 wins, and the reload says so.
    let text = std::fs::read_to_string(t.config_path()).unwrap();
    let tc1 = format!("name: tc1, address: \"{}\"", sims[0].addr());
    std::fs::write(
        t.config_path(),
        text.replace(&tc1, &format!("{tc1}, weight: 5")),
    )
    .unwrap();
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_eq!(status, 200, "{json}");
    let said = json["overridden"].to_string();
    assert!(
        said.contains("shop/tc1") && said.contains("weight 3 (file: 5)"),
        "{json}"
    );
    assert!(t.log().contains("weight 3 (file: 5)"), "{}", t.log());
    let (_, status) = t.admin("GET", "/status", None, b"").await;
    let s = weight(&status, "tc1");
    assert_eq!(s["weight"], 3);
    assert_eq!(s["runtime_override"]["file_weight"], 5, "{s}");
    assert!(weight(&status, "tc2")["runtime_override"].is_null());

    // Dropped for one server: the file's weight applies.
    let (code, json) = t
        .admin("DELETE", "/clusters/shop/servers/tc1/overrides", None, b"")
        .await;
    assert_eq!((code, json["dropped"].as_u64()), (200, Some(1)), "{json}");
    let (_, status) = t.admin("GET", "/status", None, b"").await;
    assert_eq!(weight(&status, "tc1")["weight"], 5);
    assert!(weight(&status, "tc1")["runtime_override"].is_null());
    assert_eq!(
        t.admin("DELETE", "/clusters/shop/servers/nope/overrides", None, b"")
            .await
            .0,
        404
    );

    // Or for all, on reload.
    t.admin("POST", "/clusters/shop/servers/tc2/drain", None, b"")
        .await;
    let (code, json) = t
        .admin("POST", "/reload?drop_overrides=true", None, b"")
        .await;
    assert_eq!(code, 200, "{json}");
    let (_, status) = t.admin("GET", "/status", None, b"").await;
    assert_eq!(weight(&status, "tc2")["state"], "active");
    // And DELETE /overrides drops every one.
    t.admin("POST", "/clusters/shop/servers/tc2/stop", None, b"")
        .await;
    let (code, json) = t.admin("DELETE", "/overrides", None, b"").await;
    assert_eq!((code, json["dropped"].as_u64()), (200, Some(1)), "{json}");
    assert_eq!(t.server_status(None, "tc2").await.0, "active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_is_refused_what_it_may_not_do() {
    let sims = tomcats(1).await;
    let dir = common::scratch_dir("admin-roles");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, token) in [("read", "r3ad-token"), ("operate", "0perate-token")] {
        std::fs::write(dir.join(format!("{name}.token")), format!("{token}\n")).unwrap();
    }
    let t = Tether::start_with(Opts {
        cluster: common::cluster_yaml("", &sims),
        admin: true,
        admin_token: Some(TOKEN),
        admin_extra: format!(
            "  tokens:\n    - {{ file: {d}/read.token, role: read }}\n    - {{ file: {d}/operate.token, role: operate }}\n",
            d = dir.display()
        ),
        dir: Some(dir.clone()),
        ..Opts::default()
    });
    let explain = br#"{ "url": "/" }"#.as_slice();
    let calls: [(&str, &str, &[u8]); 7] = [
        ("GET", "/status", b""),
        ("GET", "/clusters/shop/servers/tc1/sessions", b""),
        ("POST", "/explain", explain),
        ("PUT", "/clusters/shop/servers/tc1/weight", b"3"),
        ("POST", "/clusters/shop/servers/tc1/drain", b""),
        ("DELETE", "/overrides", b""),
        ("POST", "/reload", b""),
    ];
    // How many of the calls (in order) each role may make.
    for (token, allowed) in [("r3ad-token", 3), ("0perate-token", 5), (TOKEN, 7)] {
        for (i, (method, path, body)) in calls.iter().enumerate() {
            let (status, json) = t.admin(method, path, Some(token), body).await;
            if i < allowed {
                assert_eq!(status, 200, "{token} {method} {path}: {json}");
            } else {
                assert_eq!(status, 403, "{token} {method} {path}: {json}");
                assert!(
                    json["error"].as_str().unwrap().contains("may not"),
                    "{json}"
                );
            }
        }
    }
    // A refused change changed nothing: the weight is the operator's 3, never the read's.
    let (_, json) = t.admin("GET", "/status", Some("r3ad-token"), b"").await;
    assert_eq!(
        json["clusters"][0]["servers"][0]["weight"], 1,
        "dropped by the admin's DELETE"
    );
    let (status, _) = t.admin("GET", "/status", Some("wrong"), b"").await;
    assert_eq!(status, 401);
}

#[test]
fn a_bad_role_or_a_shared_token_is_a_config_error() {
    let dir = common::scratch_dir("admin-roles-config");
    std::fs::write(dir.join("a.token"), "same\n").unwrap();
    std::fs::write(dir.join("b.token"), "same\n").unwrap();
    for (tokens, why) in [
        (
            "    - { file: DIR/a.token, role: boss }\n",
            "`boss` must be read, operate or admin",
        ),
        (
            "    - { file: DIR/a.token, role: read }\n    - { file: DIR/b.token, role: admin }\n",
            "holds the same token as another entry",
        ),
        (
            "    - { file: DIR/none.token, role: read }\n",
            "cannot read",
        ),
    ] {
        let tokens = tokens.replace("DIR", &dir.display().to_string());
        let (code, err) = common::tether_t(
            &dir,
            &format!(
                "admin:\n  address: \"127.0.0.1:1\"\n  tokens:\n{tokens}\
                 listeners:\n  - {{ name: web, address: \"127.0.0.1:2\", cluster: shop }}\n\
                 clusters:\n  - name: shop\n    servers:\n      - {{ name: a, address: \"127.0.0.1:3\" }}\n"
            ),
        );
        assert_eq!(code, Some(1));
        assert!(err.contains("admin.tokens[") && err.contains(why), "{err}");
    }
}
