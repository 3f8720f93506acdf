//! `error_pages` (Apache's `ErrorDocument`): tether's own answers (404 of routes, 503,
//! 502/504, 408, 413, 429) carry the operator's page for their status or class, the
//! route's over the cluster's over the listener's, on HTTP/1 and HTTP/2; a page that
//! cannot be read refuses the config.

mod common;

use common::{tomcats, Opts, Tether};
use std::path::Path;

fn page(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tethers_answers_carry_the_most_specific_page() {
    let sims = tomcats(1).await;
    let dir = common::scratch_dir("error-pages");
    let (l404, l5xx, r404, c503) = (
        page(&dir, "l404.html", "<h1>listener: not here</h1>"),
        page(&dir, "l5xx.txt", "listener: the servers failed"),
        page(&dir, "r404.html", "<h1>shop: not here</h1>"),
        page(&dir, "c503.json", "{\"maintenance\": true}"),
    );
    // A server that never answers, for a 504.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    common::servers::fixed(silent, None);
    let t = Tether::start_with(Opts {
        cluster: format!(
            "    sticky_force: true\n    read_timeout: 200ms\n    error_pages: {{ 503: \"{c503}\" }}\n    servers:\n{}      - {{ name: slow, address: \"{silent_addr}\", route: slow }}\n",
            common::server_line(&sims[0], "")
        ),
        no_default_cluster: true,
        listener_extra: format!(
            "    h2c: true\n    error_pages: {{ 404: \"{l404}\", 5xx: \"{l5xx}\" }}\n    routes:\n      - {{ path: \"/shop/*\", cluster: shop, error_pages: {{ 404: \"{r404}\" }} }}\n      - {{ path: \"/shop/private/*\", cluster: shop, exclude: true }}\n"
        ),
        ..Opts::default()
    });
    let get = |path: &'static str, cookie: &'static str| {
        let addr = t.addr;
        async move {
            let mut c = tether::cli::sim::HttpClient::new(addr);
            let headers: Vec<(&str, &str)> = match cookie {
                "" => vec![],
                c => vec![("Cookie", c)],
            };
            let r = c.get(path, &headers).await.unwrap();
            let kind = r.header("content-type").unwrap_or("").to_string();
            (
                r.status,
                kind,
                String::from_utf8_lossy(&r.body).into_owned(),
            )
        }
    };
    let html = "text/html; charset=utf-8".to_string();
    // No route: the listener's page.
    assert_eq!(
        get("/nowhere", "").await,
        (404, html.clone(), "<h1>listener: not here</h1>".into())
    );
    // The route's exclusion: the route's page.
    assert_eq!(
        get("/shop/private/x", "").await,
        (404, html, "<h1>shop: not here</h1>".into())
    );
    // A server that does not answer in time: the listener's page for the class.
    let (status, kind, body) = get("/shop/x", "JSESSIONID=A.slow").await;
    assert_eq!(
        (status, body.as_str()),
        (504, "listener: the servers failed")
    );
    assert_eq!(kind, "text/plain; charset=utf-8");
    // The session's server is down and sticky_force refuses: the cluster's page.
    sims[0].stop().await;
    let (status, kind, body) = get("/shop/x", "JSESSIONID=A.tc1").await;
    assert_eq!(
        (status, kind.as_str(), body.as_str()),
        (503, "application/json", "{\"maintenance\": true}")
    );
    // The same page over HTTP/2.
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "--http2-prior-knowledge",
            "-w",
            "\n%{http_code} %{http_version}",
        ])
        .arg(format!("http://{}/nowhere", t.addr))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "<h1>listener: not here</h1>\n404 2"
    );
}

#[test]
fn a_page_that_cannot_be_read_or_a_bad_key_refuses_the_config() {
    let dir = common::scratch_dir("error-pages-check");
    for (pages, needle) in [
        (
            "{ 503: /nonexistent/page.html }",
            "clusters[0].error_pages.503",
        ),
        ("{ 200: /etc/hostname }", "clusters[0].error_pages.200"),
        ("{ 6xx: /etc/hostname }", "clusters[0].error_pages.6xx"),
    ] {
        let yaml = format!("listeners:\n  - {{ name: web, address: \"127.0.0.1:1\", cluster: shop }}\nclusters:\n  - name: shop\n    error_pages: {pages}\n    servers:\n      - {{ name: a, address: \"127.0.0.1:2\" }}\n");
        let (code, stderr) = common::tether_t(&dir, &yaml);
        assert!(
            code != Some(0) && stderr.contains(needle),
            "{pages}: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_error_answer_gets_the_page_with_its_status_kept() {
    let sims = tomcats(1).await;
    let dir = common::scratch_dir("error-pages-replace");
    let p5xx = page(&dir, "5xx.html", "<h1>sorry</h1>");
    let t = Tether::start_with(Opts {
        cluster: format!(
            "    replace_server_errors: 500\n    error_pages: {{ 5xx: \"{p5xx}\" }}\n    servers:\n{}",
            common::server_line(&sims[0], "")
        ),
        listener_extra: "    h2c: true\n".into(),
        ..Opts::default()
    });
    let mut c = t.client();
    sims[0].set_status(500);
    let r = c.get("/x", &[]).await.unwrap();
    assert_eq!((r.status, &r.body[..]), (500, &b"<h1>sorry</h1>"[..]));
    assert_eq!(r.header("x-server"), None, "none of the server's answer");
    // Below the threshold, the server's answer goes through untouched.
    sims[0].set_status(404);
    let r = t.client().get("/x", &[]).await.unwrap();
    assert_eq!((r.status, r.header("x-server")), (404, Some("tc1")));
    sims[0].set_status(503);
    let out = std::process::Command::new("curl")
        .args(["-s", "--http2-prior-knowledge", "-w", "\n%{http_code}"])
        .arg(format!("http://{}/x", t.addr))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "<h1>sorry</h1>\n503");
}
