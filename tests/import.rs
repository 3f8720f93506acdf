//! `tether import mod_jk`: mod_jk configs (fixtures written after the product's
//! documentation) become tether YAML that `tether -t` accepts, with every setting that has
//! no equivalent named in a comment; malformed input of either importer is an error.
//! The WebSphere plug-in importer: `import_websphere.rs`.

mod common;

use common::import::*;
use serde_yaml::Value;

fn mod_jk_full() -> String {
    import(&[
        "mod_jk",
        fixture("workers.properties").to_str().unwrap(),
        fixture("uriworkermap.properties").to_str().unwrap(),
        "--jkmount-from",
        fixture("httpd.conf").to_str().unwrap(),
    ])
}

#[test]
fn mod_jk_workers_and_mounts_become_clusters_servers_and_routes() {
    let yaml = mod_jk_full();
    let doc = parse(&yaml);
    let clusters = &doc["clusters"];
    let names: Vec<&str> = clusters
        .as_sequence()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["shop", "intranet"],
        "lb workers in order; status and template left out"
    );

    let shop = named(clusters, "shop");
    assert_eq!(shop["sticky"], Value::Bool(true));
    assert_eq!(shop["sticky_force"], Value::Bool(false));
    assert_eq!(
        shop["max_attempts"].as_u64(),
        Some(4),
        "retries=3 are rounds over the members in mod_jk: each of the 4 tried once"
    );
    assert_eq!(shop["recover_after"].as_str(), Some("30s"));
    assert_eq!(shop["balance"].as_str(), Some("least_inflight"));
    assert_eq!(shop["session_cookie"].as_str(), Some("SHOPSESSION"));
    assert_eq!(shop["session_path"].as_str(), Some("shopsession"));
    assert_eq!(
        shop["fail_on_status"],
        parse("[503, -404]"),
        "negative: not marked down"
    );
    assert_eq!(shop["connect_timeout"].as_str(), Some("2500ms"));
    assert_eq!(
        shop["read_timeout"].as_str(),
        Some("5m"),
        "largest member reply_timeout"
    );
    assert_eq!(shop["idle_timeout"].as_str(), Some("10m"));
    assert_eq!(
        shop["health_check"]["kind"].as_str(),
        Some("cping"),
        "ping_mode of AJP workers: a CPing"
    );
    assert_eq!(shop["health_check"]["timeout"].as_str(), Some("2s"));
    assert_eq!(
        shop["ajp"]["ping"].as_str(),
        Some("request"),
        "ping_mode=A: a CPing before each request too"
    );
    assert_eq!(shop["ajp"]["ping_timeout"].as_str(), Some("2s"));

    let servers = &shop["servers"];
    assert_eq!(servers.as_sequence().unwrap().len(), 4);
    let s1 = named(servers, "shop1");
    assert_eq!(
        s1["address"].as_str(),
        Some("10.0.1.11:8009"),
        "$(tc_net) and the template's port"
    );
    assert_eq!(s1["route"].as_str(), Some("shop1"));
    assert_eq!(s1["weight"].as_u64(), Some(2));
    assert_eq!(s1["domain"].as_str(), Some("rackA"));
    assert_eq!(
        s1["max_inflight"].as_u64(),
        Some(25),
        "connection_pool_size, from the template"
    );
    let s2 = named(servers, "shop2");
    assert_eq!(s2["weight"].as_u64(), Some(1), "lbfactor from the template");
    assert_eq!(s2["state"].as_str(), Some("draining"));
    assert_eq!(s2["redirect"].as_str(), Some("shop3"));
    assert_eq!(named(servers, "shop3")["state"].as_str(), Some("stopped"));
    let s4 = named(servers, "shop4");
    assert_eq!(s4["backup"], Value::Bool(true), "higher distance");
    assert!(s1["backup"].is_null());

    let intranet = named(clusters, "intranet");
    assert_eq!(
        intranet["max_attempts"].as_u64(),
        Some(2),
        "retries=40 rounds over 2 members: each tried once"
    );
    assert_eq!(
        (
            intranet["ajp"]["ping"].as_str(),
            intranet["ajp"]["ping_timeout"].as_str()
        ),
        (Some("connect"), Some("3s")),
        "connect_timeout: mod_jk's wait for a CPong after connecting"
    );
    assert!(
        intranet["connect_timeout"].is_null(),
        "not the TCP connect's"
    );
    assert_eq!(
        intranet["balance"].as_str(),
        Some("sessions"),
        "method=Session: by live sessions"
    );
    assert_eq!(
        intranet["read_timeout"].as_str(),
        Some("24h"),
        "no reply_timeout: mod_jk waited as long as it took"
    );
    assert_eq!(
        shop["recover_after"].as_str(),
        Some("30s"),
        "recover_time as said"
    );
    assert_eq!(
        intranet["recover_after"].as_str(),
        Some("1m"),
        "mod_jk's default recover_time"
    );
    let i1 = named(&intranet["servers"], "intra1");
    assert_eq!(
        i1["address"].as_str(),
        Some("10.0.2.21:8109"),
        "host:port in host"
    );
    assert_eq!(
        named(&intranet["servers"], "intra2")["weight"].as_u64(),
        Some(1000)
    );

    // AJP workers stay AJP: their ports are kept, the cluster speaks AJP with the packet
    // size of its workers, and the secret is said, not copied.
    assert!(yaml.contains("address: \"10.0.1.11:8009\"   # AJP port 8009 (the cluster's `ajp:`)"));
    let shop = doc["clusters"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str() == Some("shop"))
        .unwrap();
    assert_eq!(shop["ajp"]["packet_size"].as_u64(), Some(16384));
    assert!(shop["ajp"]["secret_file"].is_null());
    assert!(
        yaml.contains("worker.shop1.secret is set: write it to a file"),
        "{yaml}"
    );
    assert!(
        !yaml.contains("s3cret"),
        "the secret is not copied into the YAML"
    );

    // One listener, `web`, with the mounts as routes and no default cluster.
    let listeners = doc["listeners"].as_sequence().unwrap();
    assert_eq!(listeners.len(), 1, "the https listener is commented out");
    let web = &listeners[0];
    assert_eq!(web["name"].as_str(), Some("web"));
    assert_eq!(web["address"].as_str(), Some("0.0.0.0:80"));
    assert!(web["cluster"].is_null());
    assert_eq!(
        web["route_order"].as_str(),
        Some("mod_jk"),
        "mod_jk's precedence"
    );
    let r = routes(web);
    // mod_jk leaves out a pattern without a leading `/` (its documentation shows one).
    assert!(!r.iter().any(|(_, p, ..)| p == "*.jsp"), "{r:?}");
    assert!(
        yaml.contains("uriworkermap.properties:12: REVIEW: `*.jsp` does not start with `/`"),
        "{yaml}"
    );
    for want in [
        route("", "/shop", "shop"),
        route("", "/shop/*", "shop"),
        route("", "/shop/api/*", "shop"),
        route("", "/intranet/*", "intranet"),
        route("www.example.com", "/cart", "shop"),
        route("example.com", "/cart/*", "shop"),
        ("".into(), "/shop/old/*".into(), "shop".into(), false, true),
        (
            "".into(),
            "/shop/static/*".into(),
            "shop".into(),
            true,
            false,
        ),
        ("".into(), "/*.gif".into(), "shop".into(), true, false),
        ("".into(), "/*.gif".into(), "intranet".into(), true, false),
        (
            "www.example.com".into(),
            "/cart/images/*".into(),
            "shop".into(),
            true,
            false,
        ),
    ] {
        assert!(r.contains(&want), "missing {want:?} in {r:?}");
    }
    assert!(
        !r.iter()
            .any(|x| x.1.contains("jk") && x.1.contains("status")),
        "status worker mounts are no routes"
    );
    // The TLS virtual host's listener, commented out, with its certificate paths.
    for line in [
        "#   - name: https",
        "#     address: \"0.0.0.0:443\"",
        "#       cert: /etc/ssl/certs/www.example.com.pem",
        "#       - { host: \"www.example.com\", path: \"/checkout/*\", cluster: shop }",
    ] {
        assert!(yaml.contains(line), "no `{line}` in\n{yaml}");
    }
    let warnings = check(&yaml, "jk-full");
    println!("tether -t warnings:\n{warnings}");
}

#[test]
fn mod_jk_settings_without_an_equivalent_are_named_in_comments() {
    let yaml = mod_jk_full();
    let notes = comments(&yaml);
    // Every worker directive of the fixture is in the output, as a field's note or a
    // comment, except those that became the structure (type, members, address).
    let text = std::fs::read_to_string(fixture("workers.properties")).unwrap();
    let structural = ["type", "balance_workers", "host", "port", "reference"];
    for line in text.lines().filter(|l| l.starts_with("worker.")) {
        let (key, value) = line.split_once('=').unwrap();
        let parts: Vec<&str> = key.splitn(3, '.').collect();
        match parts.as_slice() {
            ["worker", "list"] => continue,
            ["worker", global] => {
                assert!(
                    notes.contains(&format!("worker.{global}={value}")),
                    "{line}"
                )
            }
            ["worker", "legacy" | "jkstatus", _] => {}
            // A secret is said, not copied into the YAML.
            ["worker", _, "secret"] => {
                assert!(
                    notes.contains(".secret is set: write it to a file"),
                    "{notes}"
                );
                assert!(
                    !notes.contains(value),
                    "the secret's value is not in the YAML"
                );
            }
            ["worker", w, d] if !structural.contains(d) => {
                let direct = format!("worker.{w}.{d}={value}");
                let inherited = format!(".{d}={value} (from worker.{w})");
                assert!(
                    notes.contains(&direct) || notes.contains(&inherited),
                    "`{line}` is not named in a comment:\n{notes}"
                );
            }
            _ => {}
        }
    }
    for needle in [
        "worker.shop.lock=P: tether shares no memory",
        "worker.shop1.secret is set",
        "status worker `jkstatus`",
        "admin API",
        "ps=\\,",
        "worker `tomcat_tpl` (line 17) is a template",
        "worker `legacy` (line 85) is neither in worker.list",
        "rule extensions `reply_timeout=300000`",
        "JkLogFile /var/log/apache2/mod_jk.log",
        "JkShmFile",
        "JkWatchdogInterval 60: no tether equivalent",
        "/jk-status=jkstatus: the status worker",
    ] {
        assert!(
            notes.contains(needle),
            "no `{needle}` in the comments:\n{notes}"
        );
    }
}

#[test]
fn mod_jk_without_mounts_sends_every_request_to_a_cluster() {
    // Like Debian's default: one AJP worker in worker.list, a load balancer over it that
    // is not listed, `ps=\` and `$(var)`.
    let dir = scratch("jk-minimal");
    let file = dir.join("workers.properties");
    std::fs::write(
        &file,
        "\
# minimal mod_jk setup
tomcat_host=127.0.0.1
ps=\\
worker.list=tc
worker.tc.port=8009
worker.tc.host=$(tomcat_host)
worker.tc.type=ajp13
worker.tc.lbfactor=1
worker.balancer.type=lb
worker.balancer.balance_workers=tc
",
    )
    .unwrap();
    let yaml = import(&["mod_jk", file.to_str().unwrap()]);
    let doc = parse(&yaml);
    let web = &doc["listeners"][0];
    assert_eq!(
        web["cluster"].as_str(),
        Some("tc"),
        "mod_jk serves the workers of worker.list"
    );
    assert!(web["routes"].is_null());
    assert_eq!(doc["clusters"][0]["name"].as_str(), Some("balancer"));
    assert_eq!(
        doc["clusters"][0]["servers"][0]["address"].as_str(),
        Some("127.0.0.1:8009")
    );
    assert!(
        doc["clusters"][0]["ajp"].is_mapping(),
        "ajp13 workers: an AJP cluster"
    );
    assert_eq!(
        doc["clusters"][1]["name"].as_str(),
        Some("tc"),
        "listed worker on its own"
    );
    assert!(yaml.contains("`balancer` is not in worker.list"));
    check(&yaml, "jk-minimal");
}

#[test]
fn malformed_input_is_an_error_with_its_file_and_line() {
    let dir = scratch("malformed");
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let good = write(
        "good.properties",
        "worker.list=lb\nworker.lb.type=lb\nworker.lb.balance_workers=a\nworker.a.host=127.0.0.1\n",
    );
    let cases: Vec<(Vec<String>, String, &str)> = vec![
        (
            vec!["mod_jk".into(), write("w1.properties", "# ok\nworker.list=lb\nworker.lb.type lb\n")],
            "w1.properties:3:".into(),
            "expected `name=value`",
        ),
        (
            vec!["mod_jk".into(), write("w2.properties", "worker.a.host=$(nowhere_defined_var)\n")],
            "w2.properties:1:".into(),
            "not defined",
        ),
        (
            vec!["mod_jk".into(), write("w3.properties", "\nworker.a.reference=worker.b\nworker.b.reference=worker.a\n")],
            "w3.properties:3:".into(),
            "loop",
        ),
        (
            vec!["mod_jk".into(), write("w4.properties", "worker.a.host=h\nworker.a.port=80x\nworker.list=a\n")],
            "w4.properties:2:".into(),
            "not a port",
        ),
        (
            vec!["mod_jk".into(), good.clone(), write("u.properties", "/a=lb\n\n/shop/*=\n")],
            "u.properties:3:".into(),
            "is mapped to no worker",
        ),
        (
            vec!["mod_jk".into(), good.clone(), "--jkmount-from".into(), write("h.conf", "<VirtualHost *:80>\n  JkMount /a b c\n</VirtualHost>\n")],
            "h.conf:2:".into(),
            "JkMount takes a URI pattern and a worker",
        ),
        (
            vec!["mod_jk".into(), write("w5.properties", "worker.list=lb\nworker.lb.type=lb\nworker.lb.balance_workers=a\nworker.a.host=127.0.0.1\nworker.a.route=\n")],
            "w5.properties:5:".into(),
            "route `` is not one tether can use",
        ),
        (
            vec!["mod_jk".into(), write("w6.properties", "worker.list=lb\nworker.lb.type=lb\nworker.lb.balance_workers=a\nworker.a.host=127.0.0.1\nworker.a.jvm_route=a;b\n")],
            "w6.properties:5:".into(),
            "route `a;b` is not one tether can use",
        ),
        (
            vec!["mod_jk".into(), write("w7.properties", "worker.list=lb\nworker.lb.type=lb\nworker.lb.balance_workers=a,b\nworker.a.host=10.0.0.1\nworker.b.host=10.0.0.2\nworker.b.host=10.0.0.1\n")],
            "w7.properties:6:".into(),
            "workers `a` and `b` are both at 10.0.0.1:8009",
        ),
        (
            vec!["mod_jk".into(), write("w8.properties", "worker.list=lb\nworker.lb.type=lb\nworker.lb.balance_workers=a,b\nworker.a.host=10.0.0.1\nworker.b.host=10.0.0.2\nworker.b.route=a\n")],
            "w8.properties:6:".into(),
            "workers `a` and `b` both have route `a`",
        ),
        (
            vec!["websphere".into(), write("p1.xml", "<Config>\n <ServerCluster Name=\"c\">\n</Config>\n")],
            "p1.xml:3:".into(),
            "not well-formed XML",
        ),
        (
            vec!["websphere".into(), write("p2.xml", "<Config>\n <ServerCluster Name=\"c\">\n  <Server Name=\"s\">\n   <Transport Hostname=\"h\" Port=\"x\"/>\n  </Server>\n </ServerCluster>\n</Config>\n")],
            "p2.xml:4:".into(),
            "is not a port",
        ),
        (
            vec!["websphere".into(), write("p3.xml", "<Config>\n <ServerCluster Name=\"c\">\n  <Server Name=\"s\"><Transport Hostname=\"h\" Port=\"1\"/></Server>\n </ServerCluster>\n <Route ServerCluster=\"c\" UriGroup=\"nope\"/>\n</Config>\n")],
            "p3.xml:5:".into(),
            "UriGroup `nope`",
        ),
        (
            vec!["websphere".into(), write("p4.xml", "<Config>\n <ServerCluster Name=\"c\">\n  <Server Name=\"s\" CloneID=\"9c+d1e2f\">\n   <Transport Hostname=\"h\" Port=\"1\"/>\n  </Server>\n </ServerCluster>\n</Config>\n")],
            "p4.xml:3:".into(),
            "CloneID `9c+d1e2f` is not a clone id tether can use",
        ),
        (
            vec!["websphere".into(), write("p5.xml", "<Config>\n <ServerCluster Name=\"c\">\n  <Server Name=\"s1\"><Transport Hostname=\"h\" Port=\"1\" Protocol=\"http\"/></Server>\n  <Server Name=\"s2\"><Transport Hostname=\"h\" Port=\"1\" Protocol=\"http\"/></Server>\n </ServerCluster>\n</Config>\n")],
            "p5.xml:4:".into(),
            "Servers `s1` and `s2` are both at h:1",
        ),
        (
            vec!["websphere".into(), write("p6.xml", "<Config>\n <ServerCluster Name=\"c\">\n  <Server Name=\"s1\" CloneID=\"x1\"><Transport Hostname=\"h\" Port=\"1\" Protocol=\"http\"/></Server>\n  <Server Name=\"s2\" CloneID=\"x1\"><Transport Hostname=\"h\" Port=\"2\" Protocol=\"http\"/></Server>\n </ServerCluster>\n</Config>\n")],
            "p6.xml:4:".into(),
            "Servers `s1` and `s2` both have CloneID `x1`",
        ),
    ];
    for (args, at, needle) in cases {
        let mut all = vec!["import"];
        all.extend(args.iter().map(String::as_str));
        let out = tether(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?} printed a config");
        assert!(stderr.contains(&at), "{args:?}: no `{at}` in {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: no `{needle}` in {stderr}"
        );
    }
}
