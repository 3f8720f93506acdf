//! Host and path routes over real sockets: mod_jk's precedence, exclusions, answers by
//! tether itself, per-route plugins, the access log and metrics naming the route, reload,
//! and `tether -t` warnings.

mod common;

use common::{scratch_dir, server_line, tomcats, Opts, Tether};
use tether::cli::sim::HttpClient;

/// Clusters `shop` (tc1) and `static` (tc2), a listener with `routes` and no default.
fn start(sims: &[tether::cli::sim::TomcatSim], routes: &str, admin: bool) -> Tether {
    let cluster = format!(
        "    servers:\n{}  - name: static\n    servers:\n{}",
        server_line(&sims[0], ""),
        server_line(&sims[1], "")
    );
    let t = Tether::start_with(Opts {
        cluster,
        listener_extra: format!("    routes:\n{routes}"),
        metrics: true,
        access_log: true,
        admin,
        ..Opts::default()
    });
    t
}

async fn get(t: &Tether, host: &str, path: &str) -> (u16, String, Option<String>) {
    let r = HttpClient::new(t.addr)
        .get(path, &[("Host", host)])
        .await
        .unwrap();
    (
        r.status,
        r.header("x-server").unwrap_or("").to_string(),
        r.header("location").map(str::to_string),
    )
}

const ROUTES: &str = "      - { name: shop, path: \"/shop/*\", cluster: shop }
      - { name: images, path: \"/shop/*.gif\", cluster: shop, exclude: true }
      - { name: static, path: \"/*.css\", cluster: static }
      - { name: admin-host, host: \"admin.example.com\", path: \"/shop/*\", cluster: static }
      - { name: blocked, path: \"/shop/internal/*\", respond: { status: 403, body: \"no\" } }
      - { name: moved, path: \"/old\", redirect: { to: \"https://example.com/new\", status: 301 } }
      - { name: off, path: \"/off/*\", cluster: shop, disabled: true }
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_go_where_the_most_specific_route_says() {
    let sims = tomcats(2).await;
    // The listener's default cluster is `shop`: replaced by routes only (no default).
    let t = start(&sims, ROUTES, false);
    for (host, path, want) in [
        ("www.example.com", "/shop/cart", (200, "tc1")),
        ("www.example.com", "/css/a.css", (200, "tc2")),
        // `/shop/*` has more literal characters than `/*.css`: it wins.
        ("www.example.com", "/shop/a.css", (200, "tc1")),
        ("admin.example.com", "/shop/cart", (200, "tc2")),
        ("www.example.com", "/shop/img/x.gif", (404, "")),
        ("www.example.com", "/shop/internal/x", (403, "")),
        ("www.example.com", "/off/x", (200, "tc1")),
        // Matched as mod_jk matched them: decoded, dot segments and `//` resolved, so no
        // spelling of a path escapes its exclusion or its route.
        ("www.example.com", "/shop/./img/x.gif", (404, "")),
        ("www.example.com", "/shop//img/x.gif", (404, "")),
        ("www.example.com", "/shop/img/x%2Egif", (404, "")),
        ("www.example.com", "/x/../shop/internal/x", (403, "")),
        ("www.example.com", "/%73hop/internal/x", (403, "")),
        (
            "www.example.com",
            "/shop;jsessionid=A.tc1/internal/x",
            (403, ""),
        ),
    ] {
        let (status, server, _) = get(&t, host, path).await;
        assert_eq!((status, server.as_str()), want, "{host}{path}");
    }
    let (status, _, location) = get(&t, "www.example.com", "/old").await;
    assert_eq!(status, 301);
    assert_eq!(location.as_deref(), Some("https://example.com/new"));
    // The access log and the metrics name the route.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let log = std::fs::read_to_string(t.dir.join("access.log")).unwrap();
    assert!(log.contains(r#""route":"admin-host""#), "{log}");
    let scrape = common::scrape(t.metrics.unwrap()).await;
    assert!(
        scrape.contains(r#"tether_route_requests_total{listener="web",route="shop"} 6"#),
        "{scrape}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrouted_request_goes_to_the_default_cluster_or_gets_404() {
    let sims = tomcats(2).await;
    let cluster = format!(
        "    servers:\n{}  - name: static\n    servers:\n{}",
        server_line(&sims[0], ""),
        server_line(&sims[1], "")
    );
    let routes = "    routes:\n      - { path: \"/shop/*\", cluster: static }\n";
    for (no_default, unrouted) in [(false, (200, "tc1")), (true, (404, ""))] {
        let t = Tether::start_with(Opts {
            cluster: cluster.clone(),
            listener_extra: routes.into(),
            no_default_cluster: no_default,
            ..Opts::default()
        });
        let (status, server, _) = get(&t, "h", "/other").await;
        assert_eq!(
            (status, server.as_str()),
            unrouted,
            "no default: {no_default}"
        );
        assert_eq!(get(&t, "h", "/shop/x").await.1, "tc2");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_changes_routes_atomically() {
    let sims = tomcats(2).await;
    let t = start(&sims, ROUTES, true);
    assert_eq!(get(&t, "h", "/shop/cart").await.1, "tc1");
    let text = std::fs::read_to_string(t.config_path()).unwrap();
    std::fs::write(
        t.config_path(),
        text.replace(
            "{ name: shop, path: \"/shop/*\", cluster: shop }",
            "{ name: shop, path: \"/shop/*\", cluster: static }",
        ),
    )
    .unwrap();
    let (status, json) = t.admin("POST", "/reload", None, b"").await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(get(&t, "h", "/shop/cart").await.1, "tc2");
}

#[test]
fn tether_t_warns_of_routes_that_can_never_win() {
    let yaml = "\
listeners:
  - name: web
    address: 127.0.0.1:8080
    routes:
      - { path: \"/a/*\", cluster: shop }
      - { path: \"/a/*\", cluster: shop }
      - { path: \"/b/*.gif\", cluster: other, exclude: true }
clusters:
  - name: shop
    servers:
      - { name: n1, address: 127.0.0.1:8081 }
  - name: other
    servers:
      - { name: n2, address: 127.0.0.1:8082 }
";
    let dir = scratch_dir("routes-warn");
    let file = dir.join("w.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = std::process::Command::new(common::tether_bin())
        .args(["-t", "-c"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "warnings do not fail -t");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("w.yaml:6:")
            && stderr.contains("warning: listeners[0].routes[1]: unreachable"),
        "{stderr}"
    );
    assert!(stderr.contains("excludes nothing"), "{stderr}");
    // Errors: no action, two actions, an unknown cluster, a bad host.
    for (route, says) in [
        ("{ path: \"/x\" }", "exactly one of"),
        (
            "{ path: \"/x\", cluster: shop, respond: { status: 403 } }",
            "exactly one of",
        ),
        ("{ path: \"/x\", cluster: nope }", "unknown cluster"),
        (
            "{ host: \"a b\", path: \"/x\", cluster: shop }",
            "is not a host",
        ),
        ("{ path: \"x\", cluster: shop }", "must start with"),
    ] {
        let y = yaml.replace(
            "{ path: \"/a/*\", cluster: shop }\n      - { path: \"/a/*\", cluster: shop }",
            route,
        );
        let e = tether::config::parse(&y, "t.yaml").expect_err(route);
        assert!(e.to_string().contains(says), "{route}: {e}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_can_carry_its_own_plugins() {
    let sims = tomcats(2).await;
    let dir = scratch_dir("route-plugins");
    let table = dir.join("users.csv");
    std::fs::write(&table, "key,target\n001,static/tc2\n").unwrap();
    let routes = format!(
        "      - name: shop\n        path: \"/shop/*\"\n        cluster: shop\n        plugins:\n          - {{ name: route_table, key: {{ cookie: user }}, file: {} }}\n",
        table.display()
    );
    let t = start(&sims, &routes, false);
    let mut c = HttpClient::new(t.addr);
    // Under the route, the route's plugin sends user 001 to static/tc2.
    let r = c.get("/shop/x", &[("Cookie", "user=001")]).await.unwrap();
    assert_eq!(r.header("x-server"), Some("tc2"));
    let r = c.get("/shop/x", &[("Cookie", "user=002")]).await.unwrap();
    assert_eq!(
        r.header("x-server"),
        Some("tc1"),
        "no opinion: the route's cluster"
    );
    // Outside it, the plugin does not run.
    let r = c.get("/other", &[("Cookie", "user=001")]).await.unwrap();
    assert_eq!(r.header("x-server"), Some("tc1"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn exclusions_of_different_clusters_are_not_duplicates() {
    let yaml = "\
listeners:
  - name: web
    address: 127.0.0.1:8080
    routes:
      - { path: \"/a/*\", cluster: shop }
      - { path: \"/b/*\", cluster: other }
      - { path: \"/*.gif\", cluster: shop, exclude: true }
      - { path: \"/*.gif\", cluster: other, exclude: true }
clusters:
  - name: shop
    servers:
      - { name: n1, address: 127.0.0.1:8081 }
  - name: other
    servers:
      - { name: n2, address: 127.0.0.1:8082 }
";
    let config = tether::config::parse(yaml, "t.yaml").unwrap();
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}
