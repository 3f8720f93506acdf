//! The admin API, its console and `/metrics` over HTTPS (`admin.tls`, `metrics.tls`), with
//! a real tether, curl and certificates made for the run: the token goes only over TLS, a
//! plain client or an unknown CA gets nothing, client certificates when `client_ca` is set,
//! `tether -t` names a bad file's field, and a warning for tokens in clear.

mod common;

use common::pki::Pki;
use common::webdriver::{click, js, until};
use common::{free_port, scratch_dir, tether_t, Opts, Tether};
use fantoccini::{ClientBuilder, Locator};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const TOKEN: &str = "s3cret-admin-token";

/// A cluster whose one server is never called (drains and status need none up).
const CLUSTER: &str = "    servers:\n      - { name: a, address: \"127.0.0.1:2\" }\n";

/// `tls:` (indented `indent`) with the `loopback` certificate (it names 127.0.0.1), and
/// `client_ca` when given.
fn tls_yaml(pki: &Pki, indent: usize, client_ca: Option<&str>) -> String {
    let pad = " ".repeat(indent);
    let mut out = format!(
        "{pad}tls:\n{pad}  cert: {}\n{pad}  key: {}\n",
        pki.path("loopback.crt"),
        pki.path("loopback.key")
    );
    if let Some(ca) = client_ca {
        out.push_str(&format!("{pad}  client_ca: {}\n", pki.path(ca)));
    }
    out
}

/// tether with its admin API (token `TOKEN`) and `/metrics` over TLS; the metrics address.
fn start(pki: &Pki, dir: &Path, client_ca: Option<&str>) -> (Tether, String) {
    let metrics = format!("127.0.0.1:{}", free_port());
    let t = Tether::start_with(Opts {
        cluster: CLUSTER.to_string(),
        admin: true,
        admin_token: Some(TOKEN),
        admin_extra: tls_yaml(pki, 2, client_ca),
        top: format!(
            "metrics:\n  address: \"{metrics}\"\n{}",
            tls_yaml(pki, 2, client_ca)
        ),
        dir: Some(dir.to_path_buf()),
        ..Opts::default()
    });
    // The admin port answering is not the metrics port answering.
    for _ in 0..250 {
        if std::net::TcpStream::connect(&metrics).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (t, metrics)
}

/// curl `url` with `args`; (exit code, HTTP status or 0, body, stderr).
fn curl(url: &str, args: &[&str]) -> (i32, u16, String, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
    (
        out.status.code().unwrap_or(-1),
        code.trim().parse().unwrap_or(0),
        body.to_string(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn bearer() -> String {
    format!("Authorization: Bearer {TOKEN}")
}

#[test]
fn the_admin_api_and_metrics_answer_over_https_only() {
    let dir = scratch_dir("admin-tls");
    let pki = Pki::new(&dir.join("pki"));
    let (t, metrics) = start(&pki, &dir, None);
    let admin = t.admin.unwrap();
    let ca = pki.path("ca.pem");

    // With the test CA and the token: the status.
    let (code, status, body, err) = curl(
        &format!("https://{admin}/status"),
        &["--cacert", &ca, "-H", &bearer()],
    );
    assert_eq!((code, status), (0, 200), "{err}{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["clusters"][0]["name"], "shop", "{body}");
    // Without the token: 401, as over plain HTTP.
    let (_, status, _, _) = curl(&format!("https://{admin}/status"), &["--cacert", &ca]);
    assert_eq!(status, 401);

    // Plain HTTP to the TLS port: no answer at all (the handshake fails, nothing is read).
    let (code, status, _, err) = curl(&format!("http://{admin}/status"), &["-H", &bearer()]);
    assert!(code != 0 && status == 0, "plain http got {status}: {err}");

    // A CA that did not issue the certificate: curl refuses it before sending the token.
    let other = pki.path("other-ca.pem");
    let (code, _, _, err) = curl(
        &format!("https://{admin}/status"),
        &["--cacert", &other, "-H", &bearer()],
    );
    assert_eq!(code, 60, "a certificate verification error: {err}");

    // The console's page and its redirect, over https (its calls are same-origin paths).
    let (code, status, body, _) = curl(&format!("https://{admin}/ui"), &["--cacert", &ca]);
    assert_eq!((code, status), (0, 200));
    assert!(body.contains("console.js"), "{body}");
    let (_, status, _, err) = curl(&format!("https://{admin}/"), &["--cacert", &ca, "-v"]);
    assert_eq!(status, 302);
    assert!(err.contains("location: /ui"), "a relative redirect: {err}");

    // /metrics over https, and not over plain http.
    let (code, status, body, err) = curl(&format!("https://{metrics}/metrics"), &["--cacert", &ca]);
    assert_eq!((code, status), (0, 200), "{err}");
    assert!(body.contains("tether_"), "{body}");
    let (code, _, _, _) = curl(&format!("http://{metrics}/metrics"), &[]);
    assert_ne!(code, 0, "plain http to the metrics TLS port");

    // `tether drain` reads the admin API's address, token and certificate from the config.
    let out = Command::new(common::tether_bin())
        .arg("-c")
        .arg(t.config_path())
        .args(["drain", "shop/a"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("shop/a: draining"), "{said}");

    // A reload does not rebuild the admin listener: it keeps its certificate and says so.
    let yaml = std::fs::read_to_string(t.config_path()).unwrap();
    let renamed = yaml
        .replace(&pki.path("loopback.crt"), &pki.path("a.crt"))
        .replace(&pki.path("loopback.key"), &pki.path("a.key"));
    std::fs::write(t.config_path(), renamed).unwrap();
    let (_, status, body, _) = curl(
        &format!("https://{admin}/reload"),
        &["--cacert", &ca, "-H", &bearer(), "-X", "POST"],
    );
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let notes = v["needs_upgrade"].to_string();
    assert!(
        notes.contains("admin.tls") && notes.contains("metrics (address or tls)"),
        "{notes}"
    );
    // Still the certificate for 127.0.0.1 (a.crt does not name it: curl would refuse).
    for url in [
        format!("https://{admin}/whoami"),
        format!("https://{metrics}/metrics"),
    ] {
        let (code, status, _, err) = curl(&url, &["--cacert", &ca, "-H", &bearer()]);
        assert_eq!((code, status), (0, 200), "{url}: {err}");
    }
    let log = t.log();
    assert!(!log.contains("in clear"), "no warning on loopback: {log}");
    drop(t);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn client_ca_requires_a_client_certificate() {
    let dir = scratch_dir("admin-mtls");
    let pki = Pki::new(&dir.join("pki"));
    let (t, metrics) = start(&pki, &dir, Some("ca.pem"));
    let admin = t.admin.unwrap();
    let ca = pki.path("ca.pem");
    let (crt, key) = (pki.path("client.crt"), pki.path("client.key"));
    for url in [
        format!("https://{admin}/whoami"),
        format!("https://{metrics}/metrics"),
    ] {
        let (code, status, _, err) = curl(&url, &["--cacert", &ca, "-H", &bearer()]);
        assert!(
            code != 0 && status == 0,
            "{url} without a client certificate: {err}"
        );
        let (code, status, body, err) = curl(
            &url,
            &[
                "--cacert",
                &ca,
                "--cert",
                &crt,
                "--key",
                &key,
                "-H",
                &bearer(),
            ],
        );
        assert_eq!((code, status), (0, 200), "{url}: {err}{body}");
    }
    drop(t);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A config whose admin API (on `address`) has `admin_extra` (indented 2).
fn admin_config(address: &str, admin_extra: &str, top: &str) -> String {
    format!(
        "{top}admin:\n  address: \"{address}\"\n{admin_extra}\
         listeners:\n  - name: web\n    address: \"127.0.0.1:1\"\n    cluster: shop\n\
         clusters:\n  - name: shop\n{CLUSTER}"
    )
}

#[test]
fn tether_t_names_a_bad_certificate_or_key_with_its_field() {
    let dir = scratch_dir("admin-tls-check");
    let pki = Pki::new(&dir.join("pki"));
    let tls = |cert: &str, key: &str, more: &str| {
        format!(
            "  tls:\n    cert: {}\n    key: {}\n{more}",
            pki.path(cert),
            pki.path(key)
        )
    };
    let good = tether_t(
        &dir,
        &admin_config("127.0.0.1:9", &tls("loopback.crt", "loopback.key", ""), ""),
    );
    assert_eq!(good.0, Some(0), "{}", good.1);

    let cases = [
        (
            tls("loopback.crt", "missing.key", ""),
            "admin.tls.key",
            "cannot read the private key",
        ),
        (
            tls("missing.crt", "loopback.key", ""),
            "admin.tls.cert",
            "cannot read the certificate",
        ),
        (
            tls("loopback.crt", "a.key", ""),
            "admin.tls.key",
            "does not fit the certificate",
        ),
        (
            tls("expired.crt", "expired.key", ""),
            "admin.tls.cert",
            "expired",
        ),
        (
            tls(
                "loopback.crt",
                "loopback.key",
                &format!("    client_ca: {}\n", pki.path("a.key")),
            ),
            "admin.tls.client_ca",
            "holds no PEM certificate",
        ),
        (
            tls("loopback.crt", "loopback.key", "    ca: x\n"),
            "admin.tls.ca",
            "unknown field `ca`",
        ),
    ];
    for (admin_tls, field, message) in cases {
        let (code, said) = tether_t(&dir, &admin_config("127.0.0.1:9", &admin_tls, ""));
        assert_eq!(code, Some(1), "{said}");
        let line = said
            .lines()
            .find(|l| l.contains(&format!(": {field}: ")))
            .unwrap_or_else(|| panic!("no error at {field}: {said}"));
        assert!(line.contains(message), "{line}");
        assert!(
            line.contains("tether.yaml:"),
            "with the file and line: {line}"
        );
    }

    // The same checks for metrics.tls.
    let top = format!(
        "metrics:\n  address: \"127.0.0.1:8\"\n  tls:\n    cert: {}\n    key: {}\n",
        pki.path("loopback.crt"),
        pki.path("other.key")
    );
    let (code, said) = tether_t(&dir, &admin_config("127.0.0.1:9", "", &top));
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.lines()
            .any(|l| l.contains(": metrics.tls.key: ") && l.contains("does not fit")),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokens_off_loopback_without_tls_are_warned_of() {
    let dir = scratch_dir("admin-tls-warn");
    let pki = Pki::new(&dir.join("pki"));
    let token = dir.join("admin.token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let token_file = format!("  token_file: {}\n", token.display());
    let warned = |said: &str| {
        said.lines()
            .any(|l| l.contains("warning: admin.address") && l.contains("in clear"))
    };

    let (code, said) = tether_t(&dir, &admin_config("0.0.0.0:9", &token_file, ""));
    assert_eq!(code, Some(0), "a warning, not an error: {said}");
    assert!(warned(&said), "{said}");
    // With TLS, or on loopback, nothing to warn of.
    let with_tls = format!("{token_file}{}", tls_yaml(&pki, 2, None));
    let (code, said) = tether_t(&dir, &admin_config("0.0.0.0:9", &with_tls, ""));
    assert_eq!(code, Some(0), "{said}");
    assert!(!warned(&said), "{said}");
    let (_, said) = tether_t(&dir, &admin_config("127.0.0.1:9", &token_file, ""));
    assert!(!warned(&said), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The console in headless Chromium over https: it signs in and lists the server (its
/// calls are same-origin paths, so they go over TLS too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_works_over_https() {
    let dir = scratch_dir("admin-tls-console");
    let pki = Pki::new(&dir.join("pki"));
    let (t, _metrics) = start(&pki, &dir, None);
    let admin = t.admin.unwrap();
    // A chromedriver of this test's own: the shared one opens browsers that check
    // certificates against the system's store, which does not hold the test CA.
    let port = free_port();
    let mut driver = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chromedriver (Debian's chromium-driver)");
    let _end = EndOnDrop(&mut driver);
    for _ in 0..400 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let profile = scratch_dir("chromium-profile-tls");
    // The test CA is not in Chromium's store: this session accepts any certificate.
    let caps = json!({
        "acceptInsecureCerts": true,
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-background-networking", "--disable-sync",
                "--window-size=1200,800",
                format!("--user-data-dir={}", profile.display()),
            ],
        }
    });
    let Value::Object(caps) = caps else {
        unreachable!()
    };
    let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a WebDriver session");
    c.goto(&format!("https://{admin}/")).await.unwrap();
    let url = c.current_url().await.unwrap();
    assert_eq!((url.scheme(), url.path()), ("https", "/ui"));
    c.find(Locator::Id("token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    click(&c, "#token-form button").await;
    until(
        &c,
        "signed in over https",
        "return !document.getElementById('console').hidden && !!document.querySelector('tr[data-server=\"shop/a\"]')",
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(js(&c, "return location.protocol").await, "https:");
    c.close().await.unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    drop(t);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ends a child process (chromedriver) with the test, even a failing one.
struct EndOnDrop<'a>(&'a mut std::process::Child);

impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
