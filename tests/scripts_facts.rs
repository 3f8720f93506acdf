//! What a Luau script reads of where a request came in (the listener, its route, TLS) and
//! of tether's view of the session, over real sockets.

mod common;

use common::script::{plugin, script_dir};
use common::{tomcats, Opts, Tether};

/// Everything a script reads of where a request came in and of its session, as its answer.
const FACTS: &str = r#"
return {
  route = function(r, ctx)
    local s = r:session()
    local tls = r.tls
    local parts = {
      "listener=" .. tostring(r.listener),
      "route=" .. tostring(r.route),
      "sni=" .. tostring(tls and tls.sni),
      "version=" .. tostring(tls and tls.version),
      "subject=" .. tostring(tls and tls.client_subject),
      "cluster=" .. tostring(s and s.cluster),
      "id=" .. tostring(s and s.id),
      "token=" .. tostring(s and s.token),
      "server=" .. tostring(s and s.server),
      "why=" .. tostring(s and s.why),
    }
    local ok, err = pcall(r.session, r, "nope")
    parts[#parts + 1] = "unknown=" .. (ok and "ok" or (tostring(err):match("no cluster `nope`") or "?"))
    return { status = 200, body = table.concat(parts, "\n") .. "\n" }
  end,
}
"#;

/// `key=value` lines as a map.
fn facts(text: &str) -> std::collections::HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_read_the_listener_route_tls_and_tethers_view_of_the_session() {
    let sims = tomcats(2).await;
    let (dir, file) = script_dir("script-facts", FACTS);
    let pki = common::pki::Pki::new(&dir.join("pki"));
    let t = Tether::start_with(Opts {
        cluster: common::cluster_yaml("", &sims),
        listener_plugins: plugin(&file, ""),
        listener_extra: format!(
            "    routes:\n      - {{ name: api, path: \"/api/*\", cluster: shop }}\n    \
             tls:\n      cert: {}\n      key: {}\n      sni:\n        - {{ names: [b.test], cert: {}, key: {} }}\n      \
             client_auth: {{ ca: {}, mode: optional }}\n",
            pki.path("a.crt"),
            pki.path("a.key"),
            pki.path("b.crt"),
            pki.path("b.key"),
            pki.path("ca.pem"),
        ),
        dir: Some(dir),
        ..Opts::default()
    });
    let port = t.addr.port();
    let curl = |host: &str, path: &str, args: &[&str]| {
        let out = std::process::Command::new("curl")
            .args(["-s", "--max-time", "10", "--cacert", &pki.path("ca.pem")])
            .args(["--resolve", &format!("{host}:{port}:127.0.0.1")])
            .args(args)
            .arg(format!("https://{host}:{port}{path}"))
            .output()
            .expect("curl");
        assert!(out.status.success(), "curl {path} {args:?}: {out:?}");
        facts(&String::from_utf8_lossy(&out.stdout))
    };
    let cert = [
        "--cert",
        &pki.path("client.crt"),
        "--key",
        &pki.path("client.key"),
    ];
    // HTTP/1.1 (tether's engine) and HTTP/2 (pingora-proxy) alike.
    for proto in ["--http1.1", "--http2"] {
        let mut args = vec![proto, "-b", "JSESSIONID=ABC.tc2"];
        args.extend(cert);
        let f = curl("b.test", "/api/orders", &args);
        let want = [
            ("listener", "web"),
            ("route", "api"),
            ("sni", "b.test"),
            ("subject", "CN=client one"),
            ("cluster", "shop"),
            ("id", "ABC.tc2"),
            ("token", "tc2"),
            ("server", "tc2"),
            ("why", "route_hit"),
            ("unknown", "no cluster `nope`"),
        ];
        for (k, v) in want {
            assert_eq!(f.get(k).map(String::as_str), Some(v), "{proto} {k}: {f:?}");
        }
        assert!(f["version"].starts_with("TLSv1."), "{f:?}");
    }
    // No certificate, no route, a session of a server the cluster does not have, no session.
    let f = curl("a.test", "/other", &["-b", "JSESSIONID=XYZ.gone"]);
    assert_eq!(f["route"], "nil");
    assert_eq!(f["subject"], "nil");
    assert_eq!(f["sni"], "a.test");
    assert_eq!(
        (f["token"].as_str(), f["why"].as_str()),
        ("gone", "hash_fallback")
    );
    let f = curl("a.test", "/", &[]);
    assert_eq!(
        (f["id"].as_str(), f["why"].as_str()),
        ("nil", "new_session")
    );
    assert!(["tc1", "tc2"].contains(&f["server"].as_str()), "{f:?}");
}
