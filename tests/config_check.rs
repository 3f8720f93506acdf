//! Config validation: `tether -t`, one test per kind of mistake, and the example file.

mod common;

use std::process::Command;
use tether::config::*;

const GOOD: &str = "\
listeners:
  - { name: web, address: 127.0.0.1:8080, cluster: shop }
clusters:
  - name: shop
    servers:
      - { name: n1, address: 127.0.0.1:8081 }
      - { name: n2, address: 127.0.0.1:8082 }
";

/// Parses `yaml`, expecting errors; returns them.
fn errors(yaml: &str) -> ConfigErrors {
    parse(yaml, "test.yaml").expect_err("config should be rejected")
}

/// The single error at `path`, with its message containing `needle`, at `line`.
fn assert_error(yaml: &str, path: &str, needle: &str, line: usize) {
    let e = errors(yaml);
    let found = e
        .errors
        .iter()
        .find(|x| x.path == path && x.message.contains(needle));
    let found = found.unwrap_or_else(|| panic!("no `{needle}` at {path} in:\n{e}"));
    assert_eq!(
        found.position.map(|p| p.0),
        Some(line),
        "line of {path}:\n{e}"
    );
}

#[test]
fn each_kind_of_mistake_is_named_with_its_line() {
    let cases: &[(&str, String, &str, &str, usize)] = &[
        (
            "yaml syntax",
            GOOD.replace("servers:", "servers: [\n"),
            "",
            "YAML syntax error",
            7,
        ),
        (
            "unknown field",
            GOOD.replace("{ name: n1,", "{ name: n1, wieght: 2,"),
            "clusters[0].servers[0].wieght",
            "unknown field",
            6,
        ),
        (
            "missing field",
            GOOD.replace("{ name: n2, address: 127.0.0.1:8082 }", "{ name: n2 }"),
            "clusters[0].servers[1]",
            "missing field `address`",
            7,
        ),
        (
            "duplicate cluster",
            format!(
                "{GOOD}  - name: shop\n    servers:\n      - {{ name: x, address: 127.0.0.1:9 }}\n"
            ),
            "clusters[1].name",
            "duplicate cluster name",
            8,
        ),
        (
            "duplicate server",
            GOOD.replace("name: n2", "name: n1"),
            "clusters[0].servers[1].name",
            "duplicate server name",
            7,
        ),
        (
            "duplicate route",
            GOOD.replace("{ name: n2,", "{ name: n2, route: n1,"),
            "clusters[0].servers[1].route",
            "duplicate route",
            7,
        ),
        (
            "duplicate clone id",
            GOOD.replace("{ name: n1,", "{ name: n1, clone_id: c1,")
                .replace("{ name: n2,", "{ name: n2, clone_id: c1,"),
            "clusters[0].servers[1].clone_id",
            "duplicate clone id",
            7,
        ),
        (
            "unknown redirect",
            GOOD.replace("{ name: n1,", "{ name: n1, redirect: n9,"),
            "clusters[0].servers[0].redirect",
            "unknown server `n9`",
            6,
        ),
        (
            "bad address",
            GOOD.replace("127.0.0.1:8082", "127.0.0.1:http"),
            "clusters[0].servers[1].address",
            "not a host:port",
            7,
        ),
        (
            "weight 0",
            GOOD.replace("{ name: n1,", "{ name: n1, weight: 0,"),
            "clusters[0].servers[0].weight",
            "between 1 and",
            6,
        ),
        (
            "forwarded_headers not a boolean",
            GOOD.replace("cluster: shop }", "cluster: shop, forwarded_headers: maybe }"),
            "listeners[0].forwarded_headers",
            "expected a boolean",
            2,
        ),
        (
            "unknown session style",
            GOOD.replace("    servers:", "    session_style: jboss\n    servers:"),
            "clusters[0].session_style",
            "unknown variant `jboss`",
            5,
        ),
        (
            "two listeners on one address",
            GOOD.replace(
                "cluster: shop }",
                "cluster: shop }\n  - { name: api, address: 127.0.0.1:8080, cluster: shop }",
            ),
            "listeners[1].address",
            "duplicate listener address",
            3,
        ),
        (
            "unknown cluster",
            GOOD.replace("cluster: shop", "cluster: shoe"),
            "listeners[0].cluster",
            "unknown cluster",
            2,
        ),
        (
            "bad duration",
            GOOD.replace("    servers:", "    recover_after: soon\n    servers:"),
            "clusters[0].recover_after",
            "not a duration",
            5,
        ),
        (
            "websphere without clone ids",
            GOOD.replace("    servers:", "    session_style: websphere\n    servers:"),
            "clusters[0].servers[0].clone_id",
            "required",
            7,
        ),
        (
            "bad health check status",
            GOOD.replace("    servers:", "    health_check: { kind: http, expect: 2xy }\n    servers:"),
            "clusters[0].health_check.expect",
            "must be a status",
            5,
        ),
        (
            "health check timeout over the interval",
            GOOD.replace("    servers:", "    health_check: { interval: 1s, timeout: 2s }\n    servers:"),
            "clusters[0].health_check.timeout",
            "at most the interval",
            5,
        ),
        (
            "fail_on_status not an error status",
            GOOD.replace("    servers:", "    fail_on_status: [200]\n    servers:"),
            "clusters[0].fail_on_status[0]",
            "4xx or 5xx",
            5,
        ),
        (
            "fail_on_status with a status twice",
            GOOD.replace("    servers:", "    fail_on_status: [503, -503]\n    servers:"),
            "clusters[0].fail_on_status[1]",
            "503 is listed twice",
            5,
        ),
        (
            "admin on a listener's address",
            format!("admin: {{ address: 127.0.0.1:8080 }}\n{GOOD}"),
            "admin.address",
            "also a listener",
            1,
        ),
        (
            "unreadable admin token file",
            format!("admin: {{ address: 127.0.0.1:9900, token_file: /nonexistent/token }}\n{GOOD}"),
            "admin.token_file",
            "cannot read",
            1,
        ),
        (
            "metrics on the admin address",
            format!("admin: {{ address: 127.0.0.1:9900 }}\nmetrics: {{ address: 127.0.0.1:9900 }}\n{GOOD}"),
            "metrics.address",
            "already",
            2,
        ),
        (
            "unknown plugin",
            GOOD.replace("cluster: shop }", "cluster: shop, plugins: [{ name: route_magic }] }"),
            "listeners[0].plugins[0].name",
            "unknown plugin `route_magic`",
            2,
        ),
        (
            "bad plugin config",
            GOOD.replace(
                "cluster: shop }",
                "cluster: shop, plugins: [{ name: route_lookup, key: { header: X }, url: \"ftp://x/{key}\", answer: { header: R } }] }",
            ),
            "listeners[0].plugins[0].url",
            "must start with http://",
            2,
        ),
        (
            "route table naming an unknown server",
            GOOD.replace("    servers:", "    plugins: [{ name: route_table, key: { header: X }, file: /nonexistent.csv }]\n    servers:"),
            "clusters[0].plugins[0].file",
            "cannot read",
            5,
        ),
        (
            "bad cluster name",
            GOOD.replace("- name: shop", "- name: \"shop floor\""),
            "clusters[0].name",
            "must be 1-64 characters",
            4,
        ),
    ];
    for (what, yaml, path, needle, line) in cases {
        eprintln!("case: {what}");
        assert_error(yaml, path, needle, *line);
    }
}

#[test]
fn all_errors_are_reported_together() {
    let yaml = GOOD
        .replace("{ name: n1,", "{ name: n1, weight: 0,")
        .replace("127.0.0.1:8082", "nonsense")
        .replace("cluster: shop", "cluster: shoe");
    let e = errors(&yaml);
    assert_eq!(e.errors.len(), 3, "{e}");
    assert!(e.has("clusters[0].servers[0].weight", "between"));
    assert!(e.has("clusters[0].servers[1].address", "nonsense"));
    assert!(e.has("listeners[0].cluster", "shoe"));
}

#[test]
fn tether_t_checks_a_file_and_exits_non_zero_on_error() {
    let dir = common::scratch_dir("check");
    let good = dir.join("good.yaml");
    let bad = dir.join("bad.yaml");
    std::fs::write(&good, GOOD).unwrap();
    std::fs::write(
        &bad,
        GOOD.replace("name: n2", "name: n1")
            .replace("cluster: shop", "cluster: x"),
    )
    .unwrap();
    let run = |path: &std::path::Path| {
        Command::new(common::tether_bin())
            .arg("-t")
            .arg("-c")
            .arg(path)
            .output()
            .unwrap()
    };
    let ok = run(&good);
    assert!(ok.status.success());
    let out = run(&bad);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.yaml: 3 errors"), "{stderr}");
    assert!(stderr.contains("bad.yaml:7:"), "{stderr}");
    assert!(
        stderr.contains("listeners[0].cluster: unknown cluster `x`"),
        "{stderr}"
    );
    let missing = run(&dir.join("nope.yaml"));
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read file"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_admin_api_open_to_the_network_needs_a_token_or_an_explicit_yes() {
    let open = format!("{GOOD}admin:\n  address: 0.0.0.0:9900\n");
    assert_error(&open, "admin.address", "not a loopback address", 9);
    // Said explicitly: accepted (tether warns at start).
    let allowed = format!("{open}  allow_unauthenticated: true\n");
    assert!(parse(&allowed, "t.yaml").is_ok());
    // Loopback without a token stays fine.
    let local = format!("{GOOD}admin:\n  address: 127.0.0.1:9900\n");
    assert!(parse(&local, "t.yaml").is_ok());
    // And `tether -t` refuses the open one.
    let dir = common::scratch_dir("admin-open");
    let file = dir.join("open.yaml");
    std::fs::write(&file, &open).unwrap();
    let out = Command::new(common::tether_bin())
        .args(["-t", "-c"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("allow_unauthenticated"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn parse_and_semantic_errors_come_in_one_pass() {
    // A misspelt top-level section, a misspelt server setting and a misspelt server field
    // used to hide every other error of the file.
    let yaml = format!(
        "acces_log: {{ path: /tmp/x }}\nserver:\n  threds: 3\n{}",
        GOOD.replace("cluster: shop", "cluster: Shop")
            .replace("{ name: n1,", "{ name: n1, weight: 0,")
            .replace("{ name: n2,", "{ name: n2, wieght: 2,")
            .replace(
                "  - name: shop\n",
                "  - name: shop\n    read_timeout: 5\n    connect_timeout: 1.5s\n"
            )
    );
    let e = errors(&yaml);
    assert!(e.has("acces_log", "unknown field"), "{e}");
    assert!(e.has("server.threds", "unknown field"), "{e}");
    assert!(
        e.has("clusters[0].servers[1].wieght", "unknown field"),
        "{e}"
    );
    assert!(
        e.has("clusters[0].servers[0].weight", "between 1 and"),
        "{e}"
    );
    assert!(
        e.has(
            "listeners[0].cluster",
            "unknown cluster `Shop` (known: `shop`); names are case-sensitive: did you mean `shop`?"
        ),
        "{e}"
    );
    assert!(
        e.has("clusters[0].read_timeout", "write a duration such as `5s`"),
        "{e}"
    );
    assert!(
        e.has(
            "clusters[0].connect_timeout",
            "decimals are not allowed: write `1500ms`"
        ),
        "{e}"
    );
    assert_eq!(e.errors.len(), 7, "{e}");
    // Each position is given once, by the report.
    let syntax = errors(&GOOD.replace("servers:", "servers: [\n"));
    assert!(!syntax.to_string().contains(" at line "), "{syntax}");
}

#[test]
fn every_duration_and_count_is_bounded() {
    let cases = [
        (
            "server:\n  grace_period_seconds: 18446744073709551615\n",
            "server.grace_period_seconds",
        ),
        (
            "server:\n  graceful_shutdown_timeout_seconds: 99999\n",
            "server.graceful_shutdown_timeout_seconds",
        ),
        ("server:\n  threads: 100000\n", "server.threads"),
        (
            "server:\n  upstream_keepalive_pool_size: 99999999\n",
            "server.upstream_keepalive_pool_size",
        ),
        (
            "server:\n  idle_buffers_per_thread: 99999999\n",
            "server.idle_buffers_per_thread",
        ),
        ("watch_config: 0s\n", "watch_config"),
        ("watch_config: 1000h\n", "watch_config"),
    ];
    for (top, path) in cases {
        let e = errors(&format!("{top}{GOOD}"));
        assert!(e.has(path, "must be between"), "{path}: {e}");
    }
    for (field, value) in [
        ("read_timeout", "99999h"),
        ("connect_timeout", "0s"),
        ("idle_timeout", "2h"),
        ("recover_after", "1000h"),
    ] {
        let yaml = GOOD.replace(
            "  - name: shop\n",
            &format!("  - name: shop\n    {field}: {value}\n"),
        );
        let e = errors(&yaml);
        assert!(
            e.has(&format!("clusters[0].{field}"), "must be between"),
            "{field}: {e}"
        );
    }
}

#[test]
fn http1_is_the_engine_unless_proxy_is_asked_for() {
    let with = |v: &str| {
        let yaml = GOOD.replace("cluster: shop }", &format!("cluster: shop, http1: {v} }}"));
        parse(&yaml, "test.yaml").expect("valid").listeners[0].http1
    };
    assert_eq!(with("engine"), Http1Path::Engine);
    assert_eq!(with("proxy"), Http1Path::Proxy);
    // The removed lean path's name still loads, as the engine that replaced it.
    assert_eq!(with("lean"), Http1Path::Engine);
    let unset = parse(GOOD, "test.yaml").expect("valid").listeners[0].http1;
    match std::env::var("TETHER_HTTP1").as_deref() {
        Ok("proxy") => assert_eq!(unset, Http1Path::Proxy),
        _ => assert_eq!(unset, Http1Path::Engine),
    }
    let bad = GOOD.replace("cluster: shop }", "cluster: shop, http1: fast }");
    assert_error(&bad, "listeners[0].http1", "`fast` is not `engine`", 2);
}

/// A misspelt cluster field is answered with the fields a cluster knows, `servers` among
/// them (it is read apart from the rest, and the list left it out).
#[test]
fn a_clusters_known_fields_include_servers() {
    let e = errors(&GOOD.replace(
        "  - name: shop\n",
        "  - name: shop\n    sticky_forse: true\n",
    ));
    assert!(e.has("clusters[0].sticky_forse", "known fields:"), "{e}");
    assert!(e.has("clusters[0].sticky_forse", "`servers`"), "{e}");
    assert!(e.has("clusters[0].sticky_forse", "`sticky_force`"), "{e}");
}

#[test]
fn ajp_takes_a_secret_file_and_a_packet_size_tomcat_can_take() {
    let dir = common::scratch_dir("config-ajp");
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("ajp.secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let with =
        |ajp: &str| GOOD.replace("    servers:\n", &format!("    ajp: {ajp}\n    servers:\n"));
    let good = with(&format!(
        "{{ secret_file: {}, packet_size: 65536 }}",
        secret.display()
    ));
    let ajp = parse(&good, "test.yaml").expect("valid").clusters[0]
        .ajp
        .clone()
        .unwrap();
    assert_eq!(
        ajp.secret.as_deref(),
        Some("s3cret"),
        "read, its newline trimmed"
    );
    assert_eq!(ajp.packet_size, 65536);
    let default = parse(&with("{}"), "test.yaml").expect("valid").clusters[0]
        .ajp
        .clone();
    assert_eq!(
        default.map(|a| (a.secret, a.packet_size)),
        Some((None, 8192))
    );
    let e = errors(&with("{ packet_size: 100000 }"));
    assert!(
        e.errors
            .iter()
            .any(|x| x.path == "clusters[0].ajp.packet_size"),
        "{e}"
    );
    let e = errors(&with("{ secret_file: /nonexistent/ajp.secret }"));
    assert!(
        e.errors
            .iter()
            .any(|x| x.path == "clusters[0].ajp.secret_file"),
        "{e}"
    );
    let both = with("{}").replace("    ajp: {}\n", "    ajp: {}\n    tls: {}\n");
    let e = errors(&both);
    assert!(
        e.errors
            .iter()
            .any(|x| x.path == "clusters[0].ajp" && x.message.contains("not both")),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
