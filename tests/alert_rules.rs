//! The alert rules (`contrib/prometheus/tether-alerts.yml`) hold together: `promtool`
//! accepts them and runs their unit tests (`tether-alerts.test.yml`: each alert fires on
//! its recorded series and stays quiet on its near miss); each alert has a `for:`, a
//! severity, and a summary and description that point at the manual, which explains it;
//! and every metric they read is one a running tether exports. A real Prometheus then
//! evaluates every rule against a real tether: quiet while it is healthy, firing when its
//! only server dies.

mod common;

use common::prometheus::{promtool, Prometheus};
use common::{scratch_dir, server_line, tomcats, Opts, Tether};
use serde_yaml::Value;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tether::cli::sim::HttpClient;

const RULES: &str = "contrib/prometheus/tether-alerts.yml";
const RULE_TESTS: &str = "contrib/prometheus/tether-alerts.test.yml";
const SEVERITIES: [&str; 3] = ["critical", "warning", "info"];
/// The section of the manual every alert's description points at.
const RUNBOOK: &str = "docs/observability.md#alert-rules";
/// Metrics the rules read that tether does not export: Prometheus's own.
const PROMETHEUS_OWN: [&str; 1] = ["up"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One alerting rule of the rules file.
struct Alert {
    name: String,
    expr: String,
    rule: Value,
}

impl Alert {
    fn field(&self, path: &[&str]) -> Option<String> {
        let mut v = &self.rule;
        for key in path {
            v = v.get(*key)?;
        }
        match v {
            Value::String(s) => Some(s.clone()),
            _ => None,
        }
    }
}

fn alerts() -> Vec<Alert> {
    let mut out = Vec::new();
    for group in yaml(RULES)["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            let name = rule["alert"].as_str().expect("every rule is an alert");
            out.push(Alert {
                name: name.to_string(),
                expr: rule["expr"].as_str().unwrap().to_string(),
                rule: rule.clone(),
            });
        }
    }
    out
}

#[test]
fn promtool_checks_the_rules_and_each_alert_fires_as_its_unit_tests_expect() {
    let rules = root().join(RULES);
    let (ok, out) = promtool(&["check", "rules", rules.to_str().unwrap()], b"");
    assert!(ok, "promtool check rules:\n{out}");
    let found = format!("SUCCESS: {} rules found", alerts().len());
    assert!(out.contains(&found), "{found}:\n{out}");

    // promtool fails when an expression does not parse or evaluate, or when an alert does
    // not fire (or fires) with exactly the labels and annotations a case expects.
    let tests = root().join(RULE_TESTS);
    let (ok, out) = promtool(&["test", "rules", tests.to_str().unwrap()], b"");
    assert!(ok, "promtool test rules:\n{out}");
}

#[test]
fn every_alert_has_a_firing_and_a_quiet_case() {
    let mut firing = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for case in yaml(RULE_TESTS)["tests"].as_sequence().unwrap() {
        for t in case["alert_rule_test"].as_sequence().unwrap() {
            let name = t["alertname"].as_str().unwrap().to_string();
            let expected = t["exp_alerts"].as_sequence().map_or(0, Vec::len);
            if expected > 0 {
                firing.insert(name);
            } else {
                quiet.insert(name);
            }
        }
    }
    for a in alerts() {
        assert!(
            firing.contains(&a.name),
            "{}: no case where it fires",
            a.name
        );
        assert!(
            quiet.contains(&a.name),
            "{}: no case where it must not",
            a.name
        );
    }
}

#[test]
fn every_alert_says_how_bad_it_is_and_what_to_look_at() {
    let manual = std::fs::read_to_string(root().join("docs/observability.md")).unwrap();
    let section = manual
        .split_once("\n## Alert rules\n")
        .expect("docs/observability.md has a section \"Alert rules\"")
        .1;
    let mut names = BTreeSet::new();
    for a in alerts() {
        let name = &a.name;
        assert!(names.insert(name.clone()), "{name} twice");
        assert!(a.field(&["for"]).is_some(), "{name}: no `for:`");
        let severity = a.field(&["labels", "severity"]).unwrap_or_default();
        assert!(
            SEVERITIES.contains(&severity.as_str()),
            "{name}: severity {severity:?}"
        );
        assert!(
            a.field(&["annotations", "summary"]).is_some(),
            "{name}: no summary"
        );
        let description = a.field(&["annotations", "description"]).unwrap_or_default();
        assert!(
            description.contains(RUNBOOK),
            "{name}: the description names no {RUNBOOK}"
        );
        for link in doc_links(&description) {
            assert_doc_exists(name, &link);
        }
        assert!(
            section.contains(&format!("`{name}`")),
            "docs/observability.md, \"Alert rules\", does not explain {name}"
        );
    }
}

/// The `docs/*.md` paths (with their `#anchor`) a text names.
fn doc_links(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .filter(|w| w.starts_with("docs/"))
        .map(|w| w.trim_end_matches('.').to_string())
        .collect()
}

/// `link` (`docs/file.md` or `docs/file.md#anchor`) is a chapter, and the anchor one of its
/// headings (GitHub's and mdBook's slugs).
fn assert_doc_exists(alert: &str, link: &str) {
    let (file, anchor) = link.split_once('#').unwrap_or((link, ""));
    let text = std::fs::read_to_string(root().join(file))
        .unwrap_or_else(|_| panic!("{alert} points at {file}, which does not exist"));
    if anchor.is_empty() {
        return;
    }
    let slugs = common::markdown::anchors(&text);
    assert!(
        slugs.contains(anchor),
        "{alert} points at {link}: no such heading"
    );
}

/// The metric names a PromQL expression reads: every identifier but functions and
/// aggregations, keywords, and label names (inside `{}`, or the parentheses after `by`,
/// `without`, `on`, `ignoring`, `group_left`, `group_right`); strings, numbers and
/// `[durations]` skipped.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const GROUPING: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    const KEYWORDS: [&str; 5] = ["and", "or", "unless", "bool", "offset"];
    const AGGREGATIONS: [&str; 12] = [
        "sum",
        "min",
        "max",
        "avg",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut labels_next = false;
    let mut i = 0;
    // The index just past the first `close` from `i`, past strings in between.
    let skip_to = |mut i: usize, close: char| {
        while i < chars.len() && chars[i] != close {
            if matches!(chars[i], '"' | '\'' | '`') {
                let quote = chars[i];
                i += 1;
                while i < chars.len() && chars[i] != quote {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
            }
            i += 1;
        }
        i + 1
    };
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, '"' | '\'' | '`') {
            i = skip_to(i + 1, c);
        } else if c == '{' {
            i = skip_to(i, '}');
        } else if c == '[' {
            i = skip_to(i, ']');
        } else if c == '(' && labels_next {
            i = skip_to(i, ')');
            labels_next = false;
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | ':'))
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            labels_next = GROUPING.contains(&word.as_str());
            let function = next == Some(&'(') && !labels_next;
            if !(labels_next
                || function
                || KEYWORDS.contains(&word.as_str())
                || AGGREGATIONS.contains(&word.as_str()))
            {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn metric_names_are_told_from_functions_labels_and_keywords() {
    let expr = r#"sum without (server, status_class) (rate(a_total{server="none", x=~"a|}b"}[5m]))
        / ignoring (reason) group_left max by (job) (b) > 0.05
        and on (job, instance) changes(c:rate5m[15m] offset 1h) > 1e3 unless time() - d < 14 * 86400"#;
    let want: BTreeSet<String> = ["a_total", "b", "c:rate5m", "d"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(metric_names(expr), want);
}

/// Metric names in a scrape: its `# HELP` and `# TYPE` lines (families without a sample
/// yet included) and its samples.
fn exported_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let l = l
                .strip_prefix("# HELP ")
                .or_else(|| l.strip_prefix("# TYPE "))
                .unwrap_or(l);
            if l.starts_with('#') {
                return None;
            }
            l.split(['{', ' ']).next().filter(|n| !n.is_empty())
        })
        .map(str::to_string)
        .collect()
}

/// The series `expr` returns now, as Prometheus evaluates it.
async fn firing(prom: &Prometheus, expr: &str) -> Vec<serde_json::Value> {
    prom.query(expr)
        .await
        .into_iter()
        .map(|r| r["metric"].clone())
        .collect()
}

/// Waits (30 s at most) until `expr` returns a series with every label of `labels`; with
/// `refused`, sends requests there meanwhile, each of which must fail (rates need them).
async fn wait_for(
    prom: &Prometheus,
    what: &str,
    expr: &str,
    labels: &[(&str, &str)],
    refused: Option<SocketAddr>,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(addr) = refused {
            for _ in 0..5 {
                let resp = HttpClient::new(addr).get("/", &[]).await;
                assert_ne!(resp.map_or(0, |r| r.status), 200);
            }
        }
        let found = firing(prom, expr).await;
        if found
            .iter()
            .any(|m| labels.iter().all(|(k, v)| m[*k] == *v))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} ({expr}) returned {found:?}, not {labels:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_tether_exports_every_metric_the_rules_read_and_trips_them_only_when_it_should() {
    // What makes every family the rules read appear: a cluster, a TLS listener, a fleet of
    // one with its Redis, a routing look-up plugin.
    let sims = tomcats(1).await;
    let dir = scratch_dir("alert-rules");
    let pki = common::pki::Pki::new(&dir.join("pki"));
    let redis = common::redis::Redis::start(&dir.join("redis"));
    let lookup = common::lookup::Lookup::start(&[]).await;
    let tls_port = common::free_port();
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n{}", server_line(&sims[0], "")),
        metrics: true,
        access_log: true,
        top: common::fleet::shared_state(&redis.url(), "a", ""),
        extra_listeners: format!(
            "  - name: tls\n    address: \"127.0.0.1:{tls_port}\"\n    cluster: shop\n{}",
            pki.listener_tls()
        ),
        listener_plugins: format!(
            "      - name: route_lookup\n        key: {{ header: X-User }}\n        url: \"http://{}/route/{{key}}\"\n        answer: {{ header: X-Route }}\n",
            lookup.addr()
        ),
        ..Opts::default()
    });
    let mut c = t.client();
    for i in 0..5 {
        let cookie = format!("JSESSIONID=S{i}.tc1");
        assert_eq!(c.get("/", &[]).await.unwrap().status, 200);
        let sticky = c.get("/", &[("Cookie", &cookie)]).await.unwrap();
        assert_eq!(sticky.status, 200);
    }

    let exported = exported_names(&common::scrape(t.metrics.unwrap()).await);
    let alerts = alerts();
    let mut read = BTreeSet::new();
    for a in &alerts {
        for name in metric_names(&a.expr) {
            if !PROMETHEUS_OWN.contains(&name.as_str()) {
                assert!(
                    exported.contains(&name),
                    "{} reads {name}, which tether does not export:\n{exported:#?}",
                    a.name
                );
            }
            read.insert(name);
        }
    }
    assert!(read.len() >= 15, "the rules read only {read:?}");

    // A real Prometheus scrapes it (job `tether`, as the rules expect) and evaluates each
    // rule's expression: each one runs on tether's real label sets, and on a healthy
    // tether none has anything to say.
    let prom = Prometheus::start(&dir, t.metrics.unwrap());
    wait_for(
        &prom,
        "three scrapes, Redis in sync",
        "count_over_time(tether_shared_state_up[1m]) >= 3 and tether_shared_state_up == 1",
        &[("job", "tether")],
        None,
    )
    .await;
    for a in &alerts {
        let found = firing(&prom, &a.expr).await;
        assert!(
            found.is_empty(),
            "{} on a healthy tether: {found:?}",
            a.name
        );
    }

    // Its only server dies: requests get tether's 503, and the rules see it.
    sims[0].stop().await;
    let expr = |name: &str| {
        alerts
            .iter()
            .find(|a| a.name == name)
            .unwrap_or_else(|| panic!("no alert {name}"))
            .expr
            .clone()
    };
    let shop = [("job", "tether"), ("cluster", "shop")];
    let tc1 = [("job", "tether"), ("cluster", "shop"), ("server", "tc1")];
    for (name, labels) in [
        ("TetherClusterDown", &shop[..]),
        ("TetherServerDown", &tc1[..]),
        ("TetherRefusingRequests", &shop[..]),
    ] {
        wait_for(&prom, name, &expr(name), labels, Some(t.addr)).await;
    }
    drop(prom);
    drop(t);
    let _ = std::fs::remove_dir_all(dir);
}
