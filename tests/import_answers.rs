//! `tether import`: the settings of Apache, mod_jk and the WebSphere plug-in's web server
//! that change what tether answers, carried over: the main server's `LimitRequestBody`, a
//! mount's `use_server_errors`, the `DocumentRoot` that answered what the connector declined.
//! Each imported config is checked by `tether -t`; the document root's is also run, and
//! answers with files where the web server did and from the server where it forwarded.

mod common;

use common::import::*;
use serde_yaml::Value;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tether::cli::sim::{HttpClient, TomcatSim};

#[test]
fn the_main_servers_limit_request_body_bounds_the_listeners_bodies() {
    let dir = scratch("jk-body-limit");
    let workers = dir.join("workers.properties");
    std::fs::write(
        &workers,
        "worker.list=tc\nworker.tc.host=10.0.0.5\nworker.tc.port=8009\n",
    )
    .unwrap();
    let httpd = dir.join("httpd.conf");
    std::fs::write(
        &httpd,
        "LimitRequestBody 2097152\nJkMount /app/* tc\n<Location /upload>\n  LimitRequestBody 0\n</Location>\n",
    )
    .unwrap();
    let yaml = import(&[
        "mod_jk",
        workers.to_str().unwrap(),
        "--jkmount-from",
        httpd.to_str().unwrap(),
    ]);
    check(&yaml, "jk-body-limit");
    let web = &parse(&yaml)["listeners"][0];
    assert_eq!(
        web["limits"]["max_request_body"].as_u64(),
        Some(2_097_152),
        "{yaml}"
    );
    assert!(
        yaml.contains("only the main server's LimitRequestBody is imported"),
        "{yaml}"
    );
}

#[test]
fn use_server_errors_on_a_mount_replaces_the_clusters_error_answers() {
    let dir = scratch("jk-server-errors");
    let workers = dir.join("workers.properties");
    std::fs::write(
        &workers,
        "worker.list=tc\nworker.tc.host=10.0.0.5\nworker.tc.port=8009\n",
    )
    .unwrap();
    let map = dir.join("uriworkermap.properties");
    std::fs::write(
        &map,
        "/app/*=tc;use_server_errors=500;reply_timeout=60000\n",
    )
    .unwrap();
    let yaml = import(&["mod_jk", workers.to_str().unwrap(), map.to_str().unwrap()]);
    check(&yaml, "jk-server-errors");
    let cluster = &parse(&yaml)["clusters"][0];
    assert_eq!(
        cluster["replace_server_errors"].as_u64(),
        Some(500),
        "{yaml}"
    );
    assert!(
        yaml.contains("rule extensions `reply_timeout=60000`: no tether equivalent"),
        "the other extension is still said: {yaml}"
    );
}

/// A web server's document root: `index.html` and `app/static/logo.txt` (the bytes a file
/// answer must carry).
fn document_root(dir: &Path) -> PathBuf {
    let root = dir.join("htdocs");
    std::fs::create_dir_all(root.join("app/static")).unwrap();
    std::fs::write(
        root.join("index.html"),
        "<h1>the web server's home page</h1>\n",
    )
    .unwrap();
    std::fs::write(root.join("app/static/logo.txt"), LOGO).unwrap();
    root
}

const LOGO: &[u8] = b"logo bytes \x00\x01\xff, as the web server had them\n";

fn workers(dir: &Path, server: &str) -> PathBuf {
    let (host, port) = server.rsplit_once(':').unwrap();
    let file = dir.join("workers.properties");
    std::fs::write(
        &file,
        format!(
            "worker.list=tc\nworker.tc.type=ajp13\nworker.tc.host={host}\nworker.tc.port={port}\n"
        ),
    )
    .unwrap();
    file
}

/// A web listener's `serve:` as imported.
fn serve_root(yaml: &str) -> Option<String> {
    parse(yaml)["listeners"][0]["serve"]["root"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn httpds_document_root_serves_what_mod_jk_declined() {
    let dir = scratch("jk-docroot");
    let root = document_root(&dir);
    let workers = workers(&dir, "10.0.0.5:8009");
    let httpd = dir.join("httpd.conf");
    // Quoted, as Debian writes it.
    std::fs::write(
        &httpd,
        format!(
            "DocumentRoot \"{}\"\nJkMount /app/* tc\nJkUnMount /app/static/* tc\n",
            root.display()
        ),
    )
    .unwrap();
    let (w, h) = (workers.to_str().unwrap(), httpd.to_str().unwrap());
    let yaml = import(&["mod_jk", w, "--jkmount-from", h]);
    let (code, stderr) = common::tether_t(&dir, &yaml);
    assert_eq!(code, Some(0), "tether -t: {stderr}\n{yaml}");
    assert_eq!(serve_root(&yaml).as_deref(), root.to_str(), "{yaml}");
    assert!(
        yaml.contains(&format!(
            "serve:   # {h}:1: DocumentRoot {}",
            root.display()
        )),
        "the source is said: {yaml}"
    );
    assert!(
        yaml.contains("requests no route takes, and those an exclusion turns away, are answered with files from"),
        "{yaml}"
    );
    let web = &parse(&yaml)["listeners"][0];
    assert!(web["cluster"].is_null(), "{yaml}");
    assert!(
        routes(web).contains(&(
            String::new(),
            "/app/static/*".into(),
            "tc".into(),
            true,
            false
        )),
        "{yaml}"
    );

    // --document-root wins over httpd.conf's, which is said.
    let other = dir.join("other-root");
    std::fs::create_dir_all(&other).unwrap();
    let o = other.to_str().unwrap();
    let yaml = import(&["mod_jk", w, "--jkmount-from", h, "--document-root", o]);
    check(&yaml, "jk-docroot-flag");
    assert_eq!(serve_root(&yaml).as_deref(), Some(o), "{yaml}");
    assert!(
        yaml.contains(&format!("--document-root {o} is served instead")),
        "{yaml}"
    );

    // A root that is not on this machine is written commented out: the config still
    // passes tether -t, and the REVIEW says why.
    let elsewhere = "/nonexistent/tether-import/htdocs";
    let yaml = import(&[
        "mod_jk",
        w,
        "--jkmount-from",
        h,
        "--document-root",
        elsewhere,
    ]);
    check(&yaml, "jk-docroot-elsewhere");
    assert_eq!(serve_root(&yaml), None, "{yaml}");
    assert!(
        yaml.contains(&format!("#       root: {elsewhere}")),
        "{yaml}"
    );
    assert!(
        yaml.contains(&format!(
            "get 404 until `serve:` is uncommented: {elsewhere} is not a directory on this machine"
        )),
        "{yaml}"
    );
}

#[test]
fn without_a_document_root_the_404s_are_a_review_with_the_yaml_to_add() {
    let dir = scratch("jk-no-docroot");
    let workers = workers(&dir, "10.0.0.5:8009");
    let httpd = dir.join("httpd.conf");
    std::fs::write(&httpd, "JkMount /app/* tc\nJkUnMount /app/static/* tc\n").unwrap();
    let out = tether(&[
        "import",
        "mod_jk",
        workers.to_str().unwrap(),
        "--jkmount-from",
        httpd.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let yaml = String::from_utf8(out.stdout).unwrap();
    check(&yaml, "jk-no-docroot-t");
    assert_eq!(serve_root(&yaml), None);
    let review = "REVIEW: requests no route takes, and those an exclusion turns away, get 404 (Apache answered them from its DocumentRoot). To answer them with its files, add to this listener `serve: { root: /var/www/html }`";
    assert!(yaml.contains(review), "{yaml}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("add to this listener `serve: { root: /var/www/html }`"),
        "listed with the other REVIEW items: {stderr}"
    );

    // A relative --document-root is an error naming the option, and nothing is printed.
    for args in [
        vec![
            "import",
            "mod_jk",
            workers.to_str().unwrap(),
            "--document-root",
            "htdocs",
        ],
        vec![
            "import",
            "websphere",
            "plugin-cfg.xml",
            "--document-root",
            "htdocs",
        ],
    ] {
        let out = tether(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("tether import: --document-root: `htdocs` is a relative path"),
            "{stderr}"
        );
    }
}

fn plugin_cfg(dir: &Path, server: SocketAddr) -> PathBuf {
    let file = dir.join("plugin-cfg.xml");
    std::fs::write(
        &file,
        format!(
            r#"<?xml version="1.0" encoding="ISO-8859-1"?>
<Config>
  <VirtualHostGroup Name="default_host">
    <VirtualHost Name="*"/>
  </VirtualHostGroup>
  <ServerCluster Name="shop" LoadBalance="Round Robin">
    <Server Name="node1_shop1" CloneID="shop1">
      <Transport Hostname="{}" Port="{}" Protocol="http"/>
    </Server>
  </ServerCluster>
  <UriGroup Name="shop_uris">
    <Uri Name="/app/*"/>
  </UriGroup>
  <Route ServerCluster="shop" UriGroup="shop_uris" VirtualHostGroup="default_host"/>
</Config>
"#,
            server.ip(),
            server.port()
        ),
    )
    .unwrap();
    file
}

#[test]
fn the_websphere_web_servers_document_root_serves_what_no_uri_matched() {
    let dir = scratch("ws-docroot");
    let root = document_root(&dir);
    let cfg = plugin_cfg(&dir, "10.0.3.11:9080".parse().unwrap());
    let (c, r) = (cfg.to_str().unwrap(), root.to_str().unwrap());
    let yaml = import(&["websphere", c, "--document-root", r]);
    check(&yaml, "ws-docroot-t");
    assert_eq!(serve_root(&yaml).as_deref(), Some(r), "{yaml}");
    assert!(
        yaml.contains("requests no route takes are answered with files from"),
        "{yaml}"
    );
    let yaml = import(&["websphere", c]);
    check(&yaml, "ws-no-docroot-t");
    assert!(
        yaml.contains("REVIEW: requests no route takes get 404 (the plug-in left them to the web server, which answered them from its DocumentRoot). To answer them with its files, add to this listener `serve: { root: /opt/IBM/HTTPServer/htdocs }`"),
        "{yaml}"
    );
}

/// tether running the imported config, its `web` listener moved to a free loopback port;
/// killed when dropped.
struct Running {
    addr: SocketAddr,
    child: Child,
    dir: PathBuf,
}

impl Running {
    /// `edit` adapts what the test cannot give the import (a simulated server's protocol).
    fn start(yaml: &str, dir: &Path, edit: impl Fn(&mut Value)) -> Running {
        let mut config = parse(yaml);
        edit(&mut config);
        let addr = SocketAddr::from(([127, 0, 0, 1], common::free_port()));
        config["listeners"][0]["address"] = Value::from(addr.to_string());
        config["server"] = parse(&format!(
            "{{ threads: 2, grace_period_seconds: 0, pid_file: {d}/tether.pid, upgrade_sock: {d}/upgrade.sock }}",
            d = dir.display()
        ));
        let file = dir.join("running.yaml");
        std::fs::write(&file, serde_yaml::to_string(&config).unwrap()).unwrap();
        let log = std::fs::File::create(dir.join("tether.log")).unwrap();
        let mut child = Command::new(common::tether_bin())
            .arg("-c")
            .arg(&file)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start tether");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            let exited = matches!(child.try_wait(), Ok(Some(_)));
            assert!(
                !exited && Instant::now() < deadline,
                "tether did not start: {}",
                std::fs::read_to_string(dir.join("tether.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Running {
            addr,
            child,
            dir: dir.to_path_buf(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("tether.log")).unwrap_or_default()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET `path`: (status, `X-Server`, body).
async fn get(client: &mut HttpClient, path: &str) -> (u16, String, Vec<u8>) {
    let r = client.get(path, &[]).await.expect("request");
    let server = r.header("x-server").unwrap_or("").to_string();
    (r.status, server, r.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_mod_jk_config_answers_excluded_paths_with_the_document_roots_files() {
    let dir = scratch("jk-docroot-run");
    let root = document_root(&dir);
    let sim = TomcatSim::start("tc", "tc").await.unwrap();
    let workers = workers(&dir, &sim.addr().to_string());
    let httpd = dir.join("httpd.conf");
    std::fs::write(
        &httpd,
        format!(
            "DocumentRoot {}\nJkMount /app/* tc\nJkUnMount /app/static/* tc\n",
            root.display()
        ),
    )
    .unwrap();
    let yaml = import(&[
        "mod_jk",
        workers.to_str().unwrap(),
        "--jkmount-from",
        httpd.to_str().unwrap(),
    ]);
    let (code, stderr) = common::tether_t(&dir, &yaml);
    assert_eq!(code, Some(0), "tether -t: {stderr}\n{yaml}");
    // The simulated server speaks HTTP, not the AJP of mod_jk's worker.
    let tether = Running::start(&yaml, &dir, |c| {
        if let Some(cluster) = c["clusters"][0].as_mapping_mut() {
            cluster.remove("ajp");
        }
    });
    let mut client = HttpClient::new(tether.addr);
    let log = || tether.log();

    let (status, server, _) = get(&mut client, "/app/cart").await;
    assert_eq!((status, server.as_str()), (200, "tc"), "mounted: {}", log());
    // JkUnMount: the file, byte for byte, and not the server.
    let before = sim.requests();
    let (status, server, body) = get(&mut client, "/app/static/logo.txt").await;
    assert_eq!((status, server.as_str()), (200, ""), "excluded: {}", log());
    assert_eq!(body, LOGO);
    // No mount: the document root's index, as Apache answered `/`.
    let (status, _, body) = get(&mut client, "/").await;
    assert_eq!(status, 200, "unmounted: {}", log());
    assert_eq!(body, b"<h1>the web server's home page</h1>\n");
    // An excluded path with no file is the document root's 404, not the server's answer.
    let (status, server, _) = get(&mut client, "/app/static/missing.txt").await;
    assert_eq!((status, server.as_str()), (404, ""));
    assert_eq!(
        sim.requests(),
        before,
        "nothing declined reached the server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_websphere_config_answers_what_no_uri_matched_with_files() {
    let dir = scratch("ws-docroot-run");
    let root = document_root(&dir);
    let sim = TomcatSim::start("shop1", "shop1").await.unwrap();
    let cfg = plugin_cfg(&dir, sim.addr());
    let yaml = import(&[
        "websphere",
        cfg.to_str().unwrap(),
        "--document-root",
        root.to_str().unwrap(),
    ]);
    let (code, stderr) = common::tether_t(&dir, &yaml);
    assert_eq!(code, Some(0), "tether -t: {stderr}\n{yaml}");
    let tether = Running::start(&yaml, &dir, |_| {});
    let mut client = HttpClient::new(tether.addr);
    let (status, server, _) = get(&mut client, "/app/cart").await;
    assert_eq!(
        (status, server.as_str()),
        (200, "shop1"),
        "{}",
        tether.log()
    );
    let (status, server, body) = get(&mut client, "/app/static/logo.txt").await;
    assert_eq!(
        (status, server.as_str()),
        (200, "shop1"),
        "a Uri matches it"
    );
    assert_ne!(body, LOGO);
    let (status, server, body) = get(&mut client, "/index.html").await;
    assert_eq!((status, server.as_str()), (200, ""), "{}", tether.log());
    assert_eq!(body, b"<h1>the web server's home page</h1>\n");
}
