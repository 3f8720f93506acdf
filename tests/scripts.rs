//! Luau scripts (the `script` plugin) over real sockets: each phase against a recording
//! server and simulated Tomcats, a script's failures (error, time budget, memory limit,
//! a costly pattern) contained and counted, `on_error: reject`, and a broken script refused
//! by `tether -t` and by a reload while the old one keeps serving.

mod common;

use common::recording::recording_server;
use common::script::{plugin, script_dir, series};
use common::{scrape, tomcats, Opts, Tether};
use std::time::{Duration, Instant};

const PHASES: &str = r#"
-- The config's `config`, read-only, as the global `config`.
local tier = config.tier
return {
  request = function(r, ctx)
    local user = r:header("X-User")
    if not user then
      return { status = 401, body = "who are you?\n", headers = { ["WWW-Authenticate"] = "Bearer" } }
    end
    if r.path == "/old" then return { redirect = "/new", status = 301 } end
    ctx.user = user
    r:set_header("X-Checked", "yes")
    r:remove_header("X-Secret")
    local rest = r.path:match("^/api/v1/(.*)$")
    if rest then r:set_path("/api/v2/" .. rest) end
  end,
  upstream_request = function(r, ctx)
    r:set_header("X-User-Seen", ctx.user)
  end,
  response = function(resp, ctx)
    resp:set_header("X-Script", tier .. ":" .. resp.status)
  end,
  log = function(info, ctx)
    return { user = ctx.user, seen_status = info.status }
  end,
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_phase_reads_and_changes_its_message() {
    let (rec, seen) = recording_server().await;
    let (dir, file) = script_dir("script-phases", PHASES);
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n      - {{ name: rec, address: \"{rec}\" }}\n"),
        listener_plugins: plugin(&file, "        config: { tier: gold }\n"),
        access_log: true,
        dir: Some(dir.clone()),
        ..Opts::default()
    });
    let mut c = t.client();
    // The request phase answers: its status, fields and body.
    let resp = c.get("/", &[]).await.unwrap();
    assert_eq!(resp.status, 401);
    assert_eq!(resp.header("www-authenticate"), Some("Bearer"));
    assert_eq!(resp.body_str(), "who are you?\n");
    let resp = c.get("/old", &[("X-User", "001")]).await.unwrap();
    assert_eq!(resp.status, 301);
    assert_eq!(resp.header("location"), Some("/new"));
    assert!(
        seen.lock().unwrap().is_empty(),
        "answered requests reach no server"
    );
    // It changes the request: a field set, one removed, the path rewritten (query kept);
    // `ctx` carries the user to the upstream request; the response phase adds a field.
    let resp = c
        .get(
            "/api/v1/cart?x=1",
            &[("X-User", "001"), ("X-Secret", "s3cret")],
        )
        .await
        .unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("x-script"), Some("gold:200"));
    let head = seen.lock().unwrap()[0].head.clone();
    let lower = head.to_ascii_lowercase();
    assert!(
        head.starts_with("GET /api/v2/cart?x=1 HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(lower.contains("\r\nx-checked: yes\r\n"), "{head}");
    assert!(lower.contains("\r\nx-user-seen: 001\r\n"), "{head}");
    assert!(!lower.contains("x-secret"), "{head}");
    // The log phase's fields are in the access-log line.
    let deadline = Instant::now() + Duration::from_secs(5);
    let line = loop {
        let text = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
        let found = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["path"] == "/api/v2/cart?x=1" || v["path"] == "/api/v1/cart?x=1");
        if let Some(v) = found {
            break v;
        }
        assert!(Instant::now() < deadline, "no access-log line:\n{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(line["fields"]["user"], "001", "{line}");
    assert_eq!(line["fields"]["seen_status"], "200", "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_route_phase_chooses_servers_and_sessions_keep_their_affinity() {
    let sims = tomcats(3).await;
    let (dir, file) = script_dir(
        "script-route",
        r#"
return {
  route = function(r, ctx)
    if r:header("X-User") == "001" then return "shop/tc1" end
    if r:cookie("canary") == "1" then return { cluster = "shop", server = "tc3" } end
    if r:header("X-User") == "nobody" then return { status = 403, body = "no\n" } end
    if r:header("X-User") == "lost" then return "elsewhere" end
  end,
}
"#,
    );
    let t = Tether::start_with(Opts {
        cluster: common::cluster_yaml("", &sims),
        listener_plugins: plugin(&file, ""),
        metrics: true,
        dir: Some(dir),
        ..Opts::default()
    });
    let mut c = t.client();
    for _ in 0..4 {
        let resp = c.get("/", &[("X-User", "001")]).await.unwrap();
        assert_eq!(resp.header("x-server"), Some("tc1"));
        let resp = c.get("/", &[("Cookie", "canary=1")]).await.unwrap();
        assert_eq!(resp.header("x-server"), Some("tc3"));
    }
    // A session keeps its server, whatever the script prefers for new ones.
    let resp = c
        .get("/", &[("X-User", "001"), ("Cookie", "JSESSIONID=S.tc2")])
        .await
        .unwrap();
    assert_eq!(resp.header("x-server"), Some("tc2"));
    let resp = c.get("/", &[("X-User", "nobody")]).await.unwrap();
    assert_eq!(resp.status, 403);
    assert_eq!(resp.body_str(), "no\n");
    // A target the config does not have is the script's error: counted, and the request
    // is balanced as if the script had said nothing (`on_error: continue`).
    let resp = c.get("/", &[("X-User", "lost")]).await.unwrap();
    assert_eq!(resp.status, 200);
    let m = scrape(t.metrics.unwrap()).await;
    let errors = r#"tether_script_errors_total{kind="error",phase="route",script="script"}"#;
    assert_eq!(series(&m, errors), 1.0, "{m}");
    let calls = r#"tether_script_calls_total{phase="route",script="script"}"#;
    assert_eq!(series(&m, calls), 11.0, "{m}");
    // A script with only a route phase changes no message: tether's engine runs it.
    if std::env::var("TETHER_HTTP1").as_deref() != Ok("proxy") {
        assert_eq!(common::engine_requests(&m, "handover"), 0, "{m}");
    }
}

const HOSTILE: &str = r#"
return {
  request = function(r, ctx)
    local p = r.path
    if p == "/loop" then while true do end end
    if p == "/pattern" then return string.rep("a", 100000):find(".-.-.-b") end
    if p == "/bomb" then
      local t = {}
      for i = 1, 1e9 do t[i] = string.rep("x", 1000) .. i end
    end
    if p == "/error" then error("boom") end
  end,
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runaway_scripts_are_stopped_counted_and_the_thread_keeps_serving() {
    let sims = tomcats(1).await;
    let (dir, file) = script_dir("script-hostile", HOSTILE);
    let t = Tether::start_with(Opts {
        cluster: common::cluster_yaml("", &sims),
        listener_plugins: plugin(
            &file,
            "        time_budget: 50ms\n        memory_limit: 4MiB\n",
        ),
        metrics: true,
        dir: Some(dir),
        ..Opts::default()
    });
    // Many loops at once, on both threads, beside ordinary requests on the same threads.
    let mut loops = Vec::new();
    for _ in 0..6 {
        let mut c = t.client();
        loops.push(tokio::spawn(async move {
            let start = Instant::now();
            let status = c.get("/loop", &[]).await.unwrap().status;
            (status, start.elapsed())
        }));
    }
    let mut plain = t.client();
    for _ in 0..20 {
        assert_eq!(plain.get("/", &[]).await.unwrap().status, 200);
    }
    for l in loops {
        let (status, took) = l.await.unwrap();
        // Stopped at its budget; `on_error: continue` sends the request on.
        assert_eq!(status, 200);
        assert!(took < Duration::from_secs(5), "{took:?}");
    }
    let mut c = t.client();
    let start = Instant::now();
    assert_eq!(c.get("/pattern", &[]).await.unwrap().status, 200);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "the pattern was refused, not run"
    );
    assert_eq!(c.get("/bomb", &[]).await.unwrap().status, 200);
    assert_eq!(c.get("/error", &[]).await.unwrap().status, 200);
    // After a memory failure the VM is made again: the script still runs.
    assert_eq!(c.get("/error", &[]).await.unwrap().status, 200);
    let m = scrape(t.metrics.unwrap()).await;
    let kind = |k: &str| {
        let name =
            format!(r#"tether_script_errors_total{{kind="{k}",phase="request",script="script"}}"#);
        series(&m, &name)
    };
    assert_eq!(kind("budget"), 6.0, "{m}");
    assert_eq!(kind("memory"), 1.0, "{m}");
    // The refused pattern and `error("boom")`, twice.
    assert_eq!(kind("error"), 3.0, "{m}");
    let log = t.log();
    assert!(log.contains("script script: request phase failed"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_error_reject_answers_503() {
    let sims = tomcats(1).await;
    let (dir, file) = script_dir(
        "script-reject",
        "return { request = function(r) if r.path == '/bad' then error('boom') end end }",
    );
    let t = Tether::start_with(Opts {
        cluster: common::cluster_yaml("", &sims),
        listener_plugins: plugin(&file, "        on_error: reject\n"),
        dir: Some(dir),
        ..Opts::default()
    });
    let mut c = t.client();
    assert_eq!(c.get("/bad", &[]).await.unwrap().status, 503);
    assert_eq!(c.get("/good", &[]).await.unwrap().status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_script_is_refused_by_tether_t_and_by_a_reload() {
    let sims = tomcats(1).await;
    let good = "return { response = function(resp) resp:set_header('X-Version', '1') end }";
    let (dir, file) = script_dir("script-reload", good);
    let t = Tether::start_with(Opts {
        cluster: common::cluster_yaml("", &sims),
        listener_plugins: plugin(&file, ""),
        admin: true,
        dir: Some(dir),
        ..Opts::default()
    });
    let mut c = t.client();
    let version = |r: &tether::cli::sim::Response| r.header("x-version").map(str::to_string);
    assert_eq!(
        version(&c.get("/", &[]).await.unwrap()).as_deref(),
        Some("1")
    );
    // Broken: refused, with the file and line; the old script keeps serving.
    std::fs::write(
        &file,
        "return {\n  response = function(resp)\n    if then end\n  end }\n",
    )
    .unwrap();
    let out = std::process::Command::new(common::tether_bin())
        .args(["-t", "-c"])
        .arg(t.config_path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let at = format!("{}:3:", file.display());
    assert!(stderr.contains(&at), "{stderr}");
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_ne!(status, 200, "{json}");
    assert!(json.to_string().contains(&at), "{json}");
    assert_eq!(
        version(&c.get("/", &[]).await.unwrap()).as_deref(),
        Some("1")
    );
    // Fixed: the reload swaps it.
    let fixed = "return { response = function(resp) resp:set_header('X-Version', '2') end }";
    std::fs::write(&file, fixed).unwrap();
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(
        version(&c.get("/", &[]).await.unwrap()).as_deref(),
        Some("2")
    );
}

#[test]
fn scripts_are_refused_with_work_stealing() {
    let (dir, file) = script_dir("script-stealing", "return {}");
    let conf = dir.join("t.yaml");
    std::fs::write(
        &conf,
        format!(
            "server:\n  work_stealing: true\nlisteners:\n  - name: web\n    address: 127.0.0.1:1\n    \
             cluster: shop\n    plugins:\n      - {{ name: script, file: {} }}\nclusters:\n  - name: shop\n    \
             servers:\n      - {{ name: a, address: 127.0.0.1:2 }}\n",
            file.display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(common::tether_bin())
        .args(["-t", "-c"])
        .arg(&conf)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("scripts need work_stealing: false"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A request's `ctx` starts empty, whatever the request before it on the thread left in
/// its own (a field, a metatable, a frozen table).
const CTX: &str = r#"
return {
  route = function(r, ctx)
    ctx.count = (ctx.count or 0) + 1
    local body = tostring(ctx.count) .. "," .. tostring(ctx.missing) .. "," .. tostring(getmetatable(ctx))
    if r:header("X-Meta") then setmetatable(ctx, { __index = function() return "leak" end }) end
    if r:header("X-Freeze") then table.freeze(ctx) end
    return { status = 200, body = body }
  end,
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_gets_an_empty_ctx() {
    let sims = tomcats(1).await;
    let (dir, file) = script_dir("script-ctx", CTX);
    let t = Tether::start_with(Opts {
        cluster: common::cluster_yaml("", &sims),
        listener_plugins: plugin(&file, ""),
        dir: Some(dir),
        ..Opts::default()
    });
    // One connection: one thread, one VM, its ctx tables used again request after request.
    let mut c = t.client();
    for fields in [
        &[][..],
        &[("X-Meta", "1")][..],
        &[][..],
        &[("X-Freeze", "1")][..],
        &[][..],
        &[("X-Meta", "1"), ("X-Freeze", "1")][..],
        &[][..],
    ] {
        let resp = c.get("/", fields).await.unwrap();
        assert_eq!(resp.body_str(), "1,nil,nil", "after {fields:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_phase_behaves_the_same_over_http2() {
    let (rec, seen) = recording_server().await;
    let (dir, file) = script_dir("script-phases-h2", PHASES);
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n      - {{ name: rec, address: \"{rec}\" }}\n"),
        listener_plugins: plugin(&file, "        config: { tier: gold }\n"),
        listener_extra: "    h2c: true\n".into(),
        dir: Some(dir),
        ..Opts::default()
    });
    // curl over h2c with prior knowledge: `-i` prints the HTTP/2 status line and fields.
    let curl = |path: &str, fields: &[&str]| {
        let mut cmd = std::process::Command::new("curl");
        cmd.args(["-s", "-i", "--max-time", "10", "--http2-prior-knowledge"]);
        for f in fields {
            cmd.args(["-H", f]);
        }
        let out = cmd
            .arg(format!("http://{}{path}", t.addr))
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).to_ascii_lowercase()
    };
    let out = curl("/", &[]);
    assert!(out.starts_with("http/2 401"), "{out}");
    assert!(out.contains("www-authenticate: bearer"), "{out}");
    assert!(out.ends_with("who are you?\n"), "{out}");
    let out = curl("/old", &["X-User: 001"]);
    assert!(out.starts_with("http/2 301"), "{out}");
    assert!(out.contains("location: /new"), "{out}");
    let out = curl("/api/v1/cart?x=1", &["X-User: 001", "X-Secret: s3cret"]);
    assert!(out.starts_with("http/2 200"), "{out}");
    assert!(out.contains("x-script: gold:200"), "{out}");
    let head = seen.lock().unwrap()[0].head.to_ascii_lowercase();
    assert!(
        head.starts_with("get /api/v2/cart?x=1 http/1.1\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nx-checked: yes\r\n"), "{head}");
    assert!(head.contains("\r\nx-user-seen: 001\r\n"), "{head}");
    assert!(!head.contains("x-secret"), "{head}");
}
