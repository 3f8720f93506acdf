//! A headless Chromium driven over WebDriver (Debian's `chromium` and `chromium-driver`, by
//! fantoccini) for the tests of pages: the driver on a reserved port, a browser of its own
//! per window size, and the page helpers (run a script, wait for it to hold, click, take a
//! screenshot into `target/test-artifacts/console/`).

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A chromedriver on a reserved loopback port, ended with the test.
pub struct Driver {
    child: Child,
    port: u16,
    profile: PathBuf,
}

impl Driver {
    pub fn start() -> Driver {
        let port = super::free_port();
        let profile = super::scratch_dir("chromium-profile");
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's chromium-driver; ./run test installs it)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver {
            child,
            port,
            profile,
        }
    }

    /// A headless Chromium of its own (a new profile), at `width` × `height`.
    pub async fn browser(&self, width: u32, height: u32) -> Client {
        self.browser_with(width, height, &["--disable-quic".to_string()])
            .await
    }

    /// A headless Chromium as [`Driver::browser`], with more command-line `flags` (QUIC
    /// is off unless they turn it on).
    pub async fn browser_with(&self, width: u32, height: u32, flags: &[String]) -> Client {
        let mut args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            format!("--window-size={width},{height}"),
            format!(
                "--user-data-dir={}",
                self.profile.join(format!("{width}x{height}")).display()
            ),
        ];
        args.extend_from_slice(flags);
        let caps = json!({
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": args,
            }
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a WebDriver session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub async fn screenshot(c: &Client, name: &str) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("../test-artifacts/console");
    std::fs::create_dir_all(&dir).unwrap();
    let png = c.screenshot().await.expect("a screenshot");
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// The value of the script `body` (a function body that returns it) in the page.
pub async fn js(c: &Client, body: &str) -> Value {
    c.execute(body, vec![]).await.expect(body)
}

/// Waits until `body` returns true in the page; how long it took.
pub async fn until(c: &Client, what: &str, body: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if js(c, body).await == Value::Bool(true) {
            return start.elapsed();
        }
        if start.elapsed() > limit {
            screenshot(c, &format!("failed-{}", what.replace(' ', "-"))).await;
            panic!("{what}: not within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn click(c: &Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap();
}

/// Opens the admin listener's root (which sends the browser to the console) and signs in.
pub async fn sign_in(c: &Client, admin: std::net::SocketAddr, token: &str) {
    c.goto(&format!("http://{admin}/")).await.unwrap();
    assert!(c.current_url().await.unwrap().path().ends_with("/ui"));
    c.find(Locator::Id("token"))
        .await
        .unwrap()
        .send_keys(token)
        .await
        .unwrap();
    c.find(Locator::Css("#token-form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until(
        c,
        "signed in",
        "return !document.getElementById('console').hidden && document.querySelectorAll('#servers tbody tr').length > 0",
        Duration::from_secs(10),
    )
    .await;
}

/// The text of server `name`'s row cell `column` (0: cluster).
pub async fn cell(c: &Client, server: &str, column: usize) -> String {
    let v = js(
        c,
        &format!("const r = document.querySelector('tr[data-server=\"shop/{server}\"]'); return r ? r.cells[{column}].textContent : null"),
    )
    .await;
    v.as_str().unwrap_or_default().to_string()
}
