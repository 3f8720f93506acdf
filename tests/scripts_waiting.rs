//! Luau scripts that share state and wait (the `script` plugin): the shared dictionary,
//! one for all threads and kept by a reload; HTTP calls that wait without blocking the
//! thread, with loads shared; and which phases may wait.

mod common;

use common::script::{plugin, script_dir, series};
use common::{scrape, tomcats, Opts, Tether};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_shared_dictionary_is_one_for_all_threads_and_kept_by_a_reload() {
    let sims = tomcats(2).await;
    let source = r#"
return {
  request = function(r, ctx)
    if r.path == "/count" then
      return { status = 200, body = tostring(shared:get("hits")) .. "," .. tostring(shared:get("route:001")) }
    end
    shared:incr("hits")
    if r.path == "/learn" then shared:set("route:001", "shop/tc2", 60) end
  end,
  route = function(r, ctx)
    local user = r:header("X-User")
    return user and shared:get("route:" .. user)
  end,
}
"#;
    let (dir, file) = script_dir("script-shared", source);
    let t = Tether::start_with(Opts {
        cluster: common::cluster_yaml("", &sims),
        listener_plugins: plugin(&file, "        shared: { name: routes, max_size: 1MiB }\n"),
        admin: true,
        metrics: true,
        dir: Some(dir),
        ..Opts::default()
    });
    // 400 requests on 16 connections at once: tether's two threads both count.
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let mut c = t.client();
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                assert_eq!(c.get("/", &[]).await.unwrap().status, 200);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut c = t.client();
    assert_eq!(c.get("/count", &[]).await.unwrap().body_str(), "400,nil");
    // What one request stores, the next one's route phase reads, on whatever thread.
    c.get("/learn", &[]).await.unwrap();
    for _ in 0..6 {
        let resp = t.client().get("/", &[("X-User", "001")]).await.unwrap();
        assert_eq!(resp.header("x-server"), Some("tc2"));
    }
    // A reload that changes the script but keeps the dictionary's name and size keeps its
    // entries.
    std::fs::write(&file, format!("{source}\n-- v2\n")).unwrap();
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(
        c.get("/count", &[]).await.unwrap().body_str(),
        "407,shop/tc2"
    );
    let m = scrape(t.metrics.unwrap()).await;
    assert_eq!(
        series(&m, r#"tether_script_shared_entries{dict="routes"}"#),
        2.0,
        "{m}"
    );
}

/// The seed's use case: a user's server from an HTTP API, cached in the shared dictionary,
/// concurrent look-ups of one user sharing one call.
const LOOKUP: &str = r#"
return {
  route = function(r, ctx)
    local user = r:header("X-User")
    if not user then return nil end
    if user == "evil" then http.get("http://127.0.0.2:9/x") end
    return shared:get_or_load("user:" .. user, function()
      local resp, err = http.get("http://" .. config.api .. "/route/" .. user)
      if not resp or resp.status ~= 200 then return nil end
      return json.decode(resp.body).target
    end, 60)
  end,
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scripts_wait_for_http_without_blocking_and_loads_are_shared() {
    let sims = tomcats(3).await;
    let lookup = common::lookup::Lookup::start(&[("001", "shop/tc1"), ("002", "shop/tc2")]).await;
    lookup.answer_json();
    lookup.set_delay(Duration::from_millis(300));
    let (dir, file) = script_dir("script-http", LOOKUP);
    let api = lookup.addr();
    let t = Tether::start_with(Opts {
        cluster: common::cluster_yaml("", &sims),
        listener_plugins: plugin(
            &file,
            &format!(
                "        config: {{ api: \"{api}\" }}\n        shared: {{ name: users }}\n        \
                 http: {{ allow: [\"{api}\"], timeout: 3s }}\n"
            ),
        ),
        metrics: true,
        dir: Some(dir),
        ..Opts::default()
    });
    // Ten new connections at once ask for user 001, on both of tether's threads: one call.
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let mut c = t.client();
        tasks.push(tokio::spawn(async move {
            let resp = c.get("/", &[("X-User", "001")]).await.unwrap();
            resp.header("x-server").map(str::to_string)
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap().as_deref(), Some("tc1"));
    }
    assert_eq!(
        lookup.calls(),
        1,
        "concurrent look-ups of one user share one call"
    );
    let resp = t.client().get("/", &[("X-User", "002")]).await.unwrap();
    assert_eq!(resp.header("x-server"), Some("tc2"));
    assert_eq!(lookup.calls(), 2);
    // Cached: no more calls.
    for _ in 0..5 {
        let resp = t.client().get("/", &[("X-User", "001")]).await.unwrap();
        assert_eq!(resp.header("x-server"), Some("tc1"));
    }
    assert_eq!(lookup.calls(), 2);
    // A look-up that hangs delays only the requests that wait for it.
    lookup.set_delay(Duration::from_secs(2));
    let slow = {
        let mut c = t.client();
        tokio::spawn(async move {
            let start = Instant::now();
            let status = c.get("/", &[("X-User", "003")]).await.unwrap().status;
            (status, start.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let start = Instant::now();
    for user in ["001", "002", "001", "002"] {
        let mut c = t.client();
        assert_eq!(c.get("/", &[("X-User", user)]).await.unwrap().status, 200);
        assert_eq!(c.get("/", &[]).await.unwrap().status, 200);
    }
    let others = start.elapsed();
    let (status, waited) = slow.await.unwrap();
    assert_eq!(status, 200, "unknown user: balanced as usual");
    assert!(waited >= Duration::from_secs(2), "{waited:?}");
    assert!(
        others < Duration::from_secs(1),
        "requests that need no look-up were held: {others:?}"
    );
    // A destination the entry does not allow is the script's error.
    let resp = t.client().get("/", &[("X-User", "evil")]).await.unwrap();
    assert_eq!(resp.status, 200);
    let m = scrape(t.metrics.unwrap()).await;
    let errors = r#"tether_script_errors_total{kind="error",phase="route",script="script"}"#;
    assert_eq!(series(&m, errors), 1.0, "{m}");
    if std::env::var("TETHER_HTTP1").as_deref() != Ok("proxy") {
        assert_eq!(common::engine_requests(&m, "handover"), 0, "{m}");
    }
}

/// A response phase may not wait, also while a request phase of its thread's VM waits.
const WAIT_IN_RESPONSE: &str = r#"
return {
  request = function(r, ctx)
    if r.path == "/slow" then http.get("http://" .. config.api .. "/route/001") end
  end,
  response = function(r, ctx)
    local ok, err = pcall(http.get, "http://" .. config.api .. "/route/001")
    r:set_header("X-Wait", ok and "ran" or (tostring(err):gsub("%c", " ")))
  end,
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_request_and_route_phases_wait_even_while_another_request_waits() {
    // One slow server is both the script's API and the cluster's server: a request's
    // response phase then runs while other requests' request phases wait on the same VMs.
    let slow_server = common::lookup::Lookup::start(&[("001", "shop/tc1")]).await;
    slow_server.answer_json();
    slow_server.set_delay(Duration::from_millis(800));
    let (dir, file) = script_dir("script-wait-phase", WAIT_IN_RESPONSE);
    let api = slow_server.addr();
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n      - {{ name: tc1, address: \"{api}\" }}\n"),
        listener_plugins: plugin(
            &file,
            &format!(
                "        config: {{ api: \"{api}\" }}\n        \
                 http: {{ allow: [\"{api}\"], timeout: 3s }}\n"
            ),
        ),
        dir: Some(dir),
        ..Opts::default()
    });
    // Requests past their request phase, waiting for the server (on both of tether's
    // threads: connections are spread over them) ...
    let mut upstream = Vec::new();
    for _ in 0..6 {
        let mut c = t.client();
        upstream.push(tokio::spawn(async move {
            let resp = c.get("/route/001", &[]).await.unwrap();
            (
                resp.status,
                resp.header("x-wait").unwrap_or_default().to_string(),
            )
        }));
    }
    // ... then requests whose request phase waits for the API when those answer.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut slow = Vec::new();
    for _ in 0..6 {
        let mut c = t.client();
        slow.push(tokio::spawn(async move {
            c.get("/slow", &[]).await.unwrap().status
        }));
    }
    for task in upstream {
        let (status, said) = task.await.unwrap();
        assert_eq!(status, 200);
        assert!(
            said.contains("only possible in the request and route phases"),
            "the response phase's wait was refused as such: {said}"
        );
    }
    for task in slow {
        assert_eq!(task.await.unwrap(), 404, "the server knows no /slow");
    }
}
