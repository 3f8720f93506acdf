//! The operator console in a real browser: headless Chromium (Debian's `chromium`), driven
//! over WebDriver (`chromium-driver`) by fantoccini, against a real tether in front of
//! simulated servers. The tests' screenshots are kept in `target/test-artifacts/console/`.

mod common;

use common::redis::Redis;
use common::webdriver::{cell, click, js, screenshot, sign_in, until, Driver};
use common::{cluster_yaml, scratch_dir, tomcats, Browser, Opts, Tether};
use fantoccini::Locator;
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

const ADMIN: &str = "adm1n-token";
const OPERATE: &str = "0perate-token";
const READ: &str = "r3ad-token";
/// The page's refresh period (`ui/console.js`).
const REFRESH: Duration = Duration::from_secs(2);

fn with_tokens(cluster: String, dir: &std::path::Path) -> Opts {
    for (name, token) in [("read", READ), ("operate", OPERATE)] {
        std::fs::write(dir.join(format!("{name}.token")), format!("{token}\n")).unwrap();
    }
    Opts {
        cluster,
        admin: true,
        admin_token: Some(ADMIN),
        admin_extra: format!(
            "  tokens:\n    - {{ file: {d}/read.token, role: read }}\n    - {{ file: {d}/operate.token, role: operate }}\n",
            d = dir.display()
        ),
        dir: Some(dir.to_path_buf()),
        ..Opts::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_drains_servers_sees_one_die_and_asks_why() {
    let sims = tomcats(3).await;
    let dir = scratch_dir("console-operate");
    let checks = "    session_timeout: 2s\n    max_inflight: 8\n    health_check: { kind: tcp, interval: 300ms, timeout: 200ms, fall: 1, rise: 1 }\n";
    let t = Tether::start_with(with_tokens(cluster_yaml(checks, &sims), &dir));
    let driver = Driver::start();
    let c = driver.browser(1400, 1000).await;
    sign_in(&c, t.admin.unwrap(), OPERATE).await;
    assert_eq!(cell(&c, "tc1", 2).await, "active");
    assert_eq!(
        cell(&c, "tc1", 5).await,
        "0 / 8",
        "in flight, of max_inflight"
    );
    screenshot(&c, "servers").await;

    // Drain tc1 through the page: confirmed in a dialog, then its row and /status say so.
    click(&c, "button[aria-label='Drain shop/tc1']").await;
    until(
        &c,
        "the dialog",
        "return document.getElementById('confirm').open",
        Duration::from_secs(5),
    )
    .await;
    click(&c, "#confirm-ok").await;
    until(
        &c,
        "tc1 draining on the page",
        "const r = document.querySelector('tr[data-server=\"shop/tc1\"]'); return r.cells[2].textContent.startsWith('draining')",
        Duration::from_secs(5),
    )
    .await;
    let (status, _, _) = t.server_status(Some(ADMIN), "tc1").await;
    assert_eq!(status, "draining");

    // Cancelling changes nothing.
    click(&c, "button[aria-label='Stop shop/tc3']").await;
    click(&c, "#confirm-cancel").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(t.server_status(Some(ADMIN), "tc3").await.0, "active");

    // A weight, typed into the dialog.
    click(&c, "button[aria-label='Weight… shop/tc3']").await;
    let field = c.find(Locator::Id("weight-input")).await.unwrap();
    field.clear().await.unwrap();
    field.send_keys("5").await.unwrap();
    click(&c, "#confirm-ok").await;
    until(
        &c,
        "weight 5 on the page",
        "const r = document.querySelector('tr[data-server=\"shop/tc3\"]'); return r.cells[4].textContent.startsWith('5')",
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(t.server_status(Some(ADMIN), "tc3").await.2, 5);

    // tc2 dies: once tether has marked it down, the page shows it within one refresh.
    sims[1].stop().await;
    let start = Instant::now();
    loop {
        let (_, json) = t.admin("GET", "/status", Some(ADMIN), b"").await;
        if json["clusters"][0]["servers"][1]["health"] == "down" {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{json}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let shown = until(
        &c,
        "tc2 down on the page",
        "const r = document.querySelector('tr[data-server=\"shop/tc2\"]'); return r.cells[3].textContent.startsWith('down')",
        REFRESH + Duration::from_millis(1500),
    )
    .await;
    println!("tc2 shown down {shown:?} after /status said so (refresh every {REFRESH:?})");
    screenshot(&c, "drained-and-down").await;

    // Drain until empty: a live session on tc3 keeps it busy until its timeout.
    let mut user = Browser::new(&t);
    while user.get("/").await.1 != "tc3" {
        user = Browser::new(&t);
    }
    click(&c, "button[aria-label='Drain until empty shop/tc3']").await;
    click(&c, "#confirm-ok").await;
    until(
        &c,
        "drain progress shown",
        "const r = document.querySelector('tr[data-server=\"shop/tc3\"]'); return r.cells[9].textContent.includes('draining until empty')",
        Duration::from_secs(5),
    )
    .await;
    let emptied = until(
        &c,
        "tc3 empty",
        "const r = document.querySelector('tr[data-server=\"shop/tc3\"]'); return r.cells[9].textContent.includes('empty, safe to stop')",
        Duration::from_secs(10),
    )
    .await;
    println!("tc3 shown empty {emptied:?} after its drain began (session_timeout 2s)");

    // Explain: a URL and a cookie, the decision and why.
    c.find(Locator::Id("explain-url"))
        .await
        .unwrap()
        .send_keys("/cart")
        .await
        .unwrap();
    c.find(Locator::Id("explain-cookie"))
        .await
        .unwrap()
        .send_keys("JSESSIONID=ABC.tc1")
        .await
        .unwrap();
    click(&c, "#explain-form button").await;
    until(
        &c,
        "explained",
        "return document.getElementById('explain-summary').textContent.startsWith('To shop/tc1')",
        Duration::from_secs(5),
    )
    .await;
    let summary = js(
        &c,
        "return document.getElementById('explain-summary').textContent",
    )
    .await;
    assert!(
        summary
            .as_str()
            .unwrap()
            .contains("session ABC.tc1 found in cookie"),
        "{summary}"
    );
    screenshot(&c, "explained").await;
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_token_sees_no_buttons_and_a_forged_call_is_refused() {
    let sims = tomcats(2).await;
    let dir = scratch_dir("console-read");
    let t = Tether::start_with(with_tokens(cluster_yaml("", &sims), &dir));
    let driver = Driver::start();
    let c = driver.browser(1280, 900).await;
    sign_in(&c, t.admin.unwrap(), READ).await;
    let visible = js(
        &c,
        "return Array.from(document.querySelectorAll('button')).filter(b => b.offsetParent !== null).map(b => b.textContent)",
    )
    .await;
    let visible: Vec<&str> = visible
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        visible
            .iter()
            .all(|b| ["Sign out", "Explain", "← Previous", "Next →"].contains(b)),
        "a read token sees only these buttons: {visible:?}"
    );
    screenshot(&c, "read-only").await;
    // The page's own token, in a call the page never offers: refused by the server.
    let forged = c
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch('/clusters/shop/servers/tc1/drain', { method: 'POST',
                   headers: { Authorization: 'Bearer ' + sessionStorage.getItem('tether.token') } })
               .then(r => done(r.status), () => done(0));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(forged, json!(403));
    assert_eq!(t.server_status(Some(ADMIN), "tc1").await.0, "active");
    // The token is in no URL and no cookie.
    assert!(!c.current_url().await.unwrap().as_str().contains(READ));
    assert!(c.get_all_cookies().await.unwrap().is_empty());
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_from_redis_render_as_text() {
    let dir = scratch_dir("console-hostile");
    let redis = Redis::start(&dir.join("redis"));
    let sims = tomcats(1).await;
    let mut opts = with_tokens(cluster_yaml("", &sims), &dir);
    opts.top = common::fleet::shared_state(&redis.url(), "a", "");
    let t = Tether::start_with(opts);
    // Anyone who can write to Redis can name an instance.
    let hostile = "<img src=x onerror=window.__xss=1>";
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let out = Command::new("redis-cli")
        .args([
            "-p",
            &redis.port().to_string(),
            "HSET",
            "{test}:instances",
            hostile,
        ])
        .arg(format!("{now}|0|1|0123456789abcdef"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let driver = Driver::start();
    let c = driver.browser(1280, 900).await;
    sign_in(&c, t.admin.unwrap(), ADMIN).await;
    until(
        &c,
        "the hostile instance listed",
        &format!(
            "return Array.from(document.querySelectorAll('#instances th')).some(th => th.textContent === {})",
            json!(hostile)
        ),
        Duration::from_secs(10),
    )
    .await;
    let ran = js(
        &c,
        "return window.__xss === undefined && document.querySelectorAll('main img').length === 0",
    )
    .await;
    assert_eq!(ran, Value::Bool(true), "the name ran as markup");
    screenshot(&c, "hostile-name").await;
    // The page's policy forbids inline script anyway.
    let policy = js(&c, "return document.querySelector('script').src").await;
    assert!(policy.as_str().unwrap().ends_with("/ui/console.js"));
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_servers_load_filter_and_page_in_a_narrow_window() {
    let dir = scratch_dir("console-thousand");
    let mut servers = String::from("    servers:\n");
    for i in 1..=1000 {
        // Distinct loopback addresses; nothing is sent to them.
        let (a, b) = (i / 250, i % 250 + 1);
        servers.push_str(&format!(
            "      - {{ name: s{i:04}, address: \"127.0.{a}.{b}:9\" }}\n"
        ));
    }
    let t = Tether::start_with(with_tokens(servers, &dir));
    let driver = Driver::start();
    let c = driver.browser(1400, 1000).await;
    let start = Instant::now();
    sign_in(&c, t.admin.unwrap(), ADMIN).await;
    println!(
        "1,000 servers: signed in and first page shown in {:?}",
        start.elapsed()
    );
    let rows = "return document.querySelectorAll('#servers tbody tr').length";
    assert_eq!(js(&c, rows).await, json!(100), "a page of 100 rows");
    let shown = js(&c, "return document.getElementById('shown').textContent").await;
    assert!(shown.as_str().unwrap().contains("of 1000"), "{shown}");
    // Filtering: typed into the box, applied at once.
    let filter = c.find(Locator::Id("filter")).await.unwrap();
    let typed = Instant::now();
    filter.send_keys("s0999").await.unwrap();
    until(
        &c,
        "filtered",
        "return document.querySelectorAll('#servers tbody tr').length === 1",
        Duration::from_secs(5),
    )
    .await;
    println!("filter typed and applied in {:?}", typed.elapsed());
    assert_eq!(cell(&c, "s0999", 1).await, "s0999");
    filter.clear().await.unwrap();
    filter.send_keys("draining").await.unwrap();
    until(
        &c,
        "none draining",
        "return document.querySelectorAll('#servers tbody tr').length === 0",
        Duration::from_secs(5),
    )
    .await;
    filter.clear().await.unwrap();
    // The next page, by keyboard: focus the button and press Enter.
    c.execute(
        "document.getElementById('filter').dispatchEvent(new Event('input'))",
        vec![],
    )
    .await
    .unwrap();
    click(&c, "#next").await;
    until(
        &c,
        "page 2",
        "return document.querySelector('#servers tbody th').textContent === 's0101'",
        Duration::from_secs(5),
    )
    .await;
    screenshot(&c, "thousand-servers").await;
    // Focus stays on a row's button across refreshes (rows are updated in place).
    js(
        &c,
        "document.querySelector('button[aria-label=\"Stop shop/s0150\"]').focus(); return true",
    )
    .await;
    tokio::time::sleep(REFRESH + Duration::from_millis(500)).await;
    let focused = js(
        &c,
        "return document.activeElement.getAttribute('aria-label')",
    )
    .await;
    assert_eq!(focused, json!("Stop shop/s0150"), "focus lost by a refresh");
    // The admin's own buttons: a reload, confirmed, shows its time and result.
    click(&c, "#reload").await;
    click(&c, "#confirm-ok").await;
    until(
        &c,
        "the reload shown",
        "return Array.from(document.querySelectorAll('#overview dd')).some(d => d.textContent.endsWith(': applied'))",
        Duration::from_secs(10),
    )
    .await;
    // A narrow window: the page fits its width (wide tables scroll in their own box).
    c.set_window_size(420, 900).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fits = js(
        &c,
        "return document.documentElement.scrollWidth <= window.innerWidth + 1",
    )
    .await;
    assert_eq!(
        fits,
        Value::Bool(true),
        "the page overflows a narrow window"
    );
    screenshot(&c, "narrow").await;
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_served_under_a_strict_policy_and_no_get_changes_state() {
    let sims = tomcats(1).await;
    let dir = scratch_dir("console-http");
    let t = Tether::start_with(with_tokens(cluster_yaml("", &sims), &dir));
    let admin = t.admin.unwrap();
    let mut http = tether::cli::sim::HttpClient::new(admin);
    let root = http.get("/", &[]).await.unwrap();
    assert_eq!((root.status, root.header("location")), (302, Some("/ui")));
    for (path, kind) in [
        ("/ui", "text/html"),
        ("/ui/console.js", "text/javascript"),
        ("/ui/console.css", "text/css"),
    ] {
        let r = http.get(path, &[]).await.unwrap();
        assert_eq!(r.status, 200, "{path}");
        assert!(
            r.header("content-type").unwrap().starts_with(kind),
            "{path}"
        );
        let csp = r.header("content-security-policy").unwrap();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
            "{csp}"
        );
        assert!(!csp.contains("unsafe"), "{csp}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    }
    // The page is public; the data is not.
    assert_eq!(t.admin("GET", "/status", None, b"").await.0, 401);
    assert_eq!(
        t.admin("GET", "/whoami", Some(READ), b"").await.1["role"],
        "read"
    );
    // No state changes over GET, whatever the token.
    for path in [
        "/clusters/shop/servers/tc1/drain",
        "/clusters/shop/servers/tc1/stop",
        "/reload",
    ] {
        let (status, _) = t.admin("GET", path, Some(ADMIN), b"").await;
        assert!(status == 404 || status == 405, "GET {path}: {status}");
    }
    assert_eq!(t.server_status(Some(ADMIN), "tc1").await.0, "active");
}

/// With the admin listener and no token (the demo's and `conf/tether.yaml`'s setup), the
/// console opens without a sign-in and says that the API is open to whoever reaches it;
/// a server that refuses connections reads as `connection refused (address)`, with no
/// debug dump of Pingora's internals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_console_opens_and_says_the_api_is_open() {
    let sims = tomcats(1).await;
    // A port that refuses connections: reserved, never listening.
    let refusing = common::ReservedPort::new();
    let cluster = format!(
        "    health_check: {{ kind: tcp, interval: 300ms, timeout: 200ms, fall: 1, rise: 1 }}\n    servers:\n{}      - {{ name: gone, address: \"127.0.0.1:{}\" }}\n",
        common::server_line(&sims[0], ""),
        refusing.port
    );
    let t = Tether::start_with(Opts {
        cluster,
        admin: true,
        ..Opts::default()
    });
    let driver = Driver::start();
    let c = driver.browser(1400, 900).await;
    c.goto(&format!("http://{}/", t.admin.unwrap()))
        .await
        .unwrap();
    until(
        &c,
        "the console, without a sign-in",
        "return !document.getElementById('console').hidden && document.getElementById('signin').hidden",
        Duration::from_secs(10),
    )
    .await;
    let warning = js(
        &c,
        "const w = document.getElementById('open-api'); return w.hidden ? '' : w.textContent",
    )
    .await;
    let admin = t.admin.unwrap().to_string();
    assert!(
        warning
            .as_str()
            .unwrap()
            .contains(&format!("open to anyone who can reach {admin}")),
        "{warning}"
    );
    let signout = js(&c, "return document.getElementById('signout').hidden").await;
    assert_eq!(signout, json!(true), "no sign-out without a sign-in");
    let expected = format!("connection refused (127.0.0.1:{})", refusing.port);
    until(
        &c,
        "the refusing server's reason",
        &format!("const r = document.querySelector('tr[data-server=\"shop/gone\"]'); return r && r.cells[3].textContent.includes('{expected}')"),
        Duration::from_secs(10),
    )
    .await;
    let health = cell(&c, "gone", 3).await;
    assert!(
        !health.contains("Peer") && !health.contains('{'),
        "{health}"
    );
    screenshot(&c, "open-api").await;
    // The same words in `/status` and in the log.
    let (code, body) = t.admin("GET", "/status", None, b"").await;
    assert_eq!(code, 200);
    let gone = body["clusters"][0]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "gone")
        .unwrap()
        .clone();
    assert_eq!(gone["health"], "down", "{gone}");
    assert_eq!(gone["down_reason"], json!(expected), "{gone}");
    assert_eq!(gone["health_check"]["reason"], json!(expected), "{gone}");
    let log = t.log();
    assert!(log.contains(&format!("({expected}): down")), "{log}");
    assert!(!log.contains("BasicPeer"), "{log}");
    c.close().await.unwrap();
}
