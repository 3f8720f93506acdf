//! `serve:`: files from a directory as curl and a browser see them, on HTTP/1.1, HTTP/2 and
//! TLS: text, binary, empty and 1 GiB sparse files, an index, ranges, conditional requests,
//! precompressed siblings, symbolic links in and out of the root, and a hostile list of
//! paths that must never reach outside it; requests a route's exclusion turns away are
//! served from the listener's files, as httpd served what mod_jk declined.

mod common;

use common::curl::curl;
use common::pki::Pki;
use common::{Opts, Tether};
use std::path::Path;
use std::process::Command;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECRET: &str = "the-secret-outside-the-root";

/// A tree: `<dir>/root` (the listener's files, with `app/static/` beneath it) and
/// `<dir>/assets` (a route's, with precompressed siblings); `<dir>/secret.txt` outside both.
fn tree(dir: &Path) -> Vec<u8> {
    let root = dir.join("root");
    let static_dir = root.join("app/static");
    let assets = dir.join("assets");
    for d in [&static_dir, &root.join("docs"), &root.join(".git"), &assets] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(dir.join("secret.txt"), SECRET).unwrap();
    std::fs::write(root.join("hello.txt"), "hello\n").unwrap();
    std::fs::write(root.join("empty.txt"), "").unwrap();
    let binary: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    std::fs::write(root.join("bin.dat"), &binary).unwrap();
    std::fs::File::create(root.join("huge.bin"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    std::fs::write(root.join("docs/index.html"), "<h1>docs</h1>").unwrap();
    std::fs::write(root.join(".git/config"), SECRET).unwrap();
    std::fs::write(static_dir.join("app.css"), "body { color: red }").unwrap();
    std::os::unix::fs::symlink("hello.txt", root.join("inside")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", root.join("outside")).unwrap();
    std::os::unix::fs::symlink(dir, root.join("up")).unwrap();
    let fifo = root.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::fs::write(assets.join("site.css"), "plain").unwrap();
    std::fs::write(assets.join("site.css.br"), "brotli bytes").unwrap();
    std::fs::write(assets.join("site.css.gz"), "gzip bytes").unwrap();
    binary
}

/// tether with the listener's files at `<dir>/root`, `/app/*` to a simulated Tomcat but
/// `/app/static/*` excluded from it, and `/assets/*` a route's files; `extra`: more of the
/// listener (TLS).
fn start(dir: &Path, server: &str, extra: &str) -> Tether {
    let d = dir.display();
    Tether::start_with(Opts {
        cluster: format!("    servers:\n{server}"),
        no_default_cluster: true,
        listener_extra: format!(
            "    h2c: true\n{extra}    serve: {{ root: \"{d}/root\" }}\n    routes:\n\
             \x20     - {{ path: \"/app/*\", cluster: shop }}\n\
             \x20     - {{ path: \"/app/static/*\", cluster: shop, exclude: true }}\n\
             \x20     - {{ path: \"/assets/*\", serve: {{ root: \"{d}/assets\", strip_prefix: /assets, precompressed: true, cache_control: \"public, max-age=60\" }} }}\n"
        ),
        ..Opts::default()
    })
}

/// The status line and body of `path` sent byte for byte (no client tidies it first).
async fn raw_get(addr: std::net::SocketAddr, path: &[u8]) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = b"GET ".to_vec();
    req.extend_from_slice(path);
    req.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(&req).await.unwrap();
    let mut out = Vec::new();
    let read = s.read_to_end(&mut out);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), read).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.lines().next().unwrap_or_default().to_string();
    (status, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_kind_as_curl_sees_it() {
    let dir = common::scratch_dir("files");
    let binary = tree(&dir);
    let sims = common::tomcats(1).await;
    let t = start(&dir, &common::server_line(&sims[0], ""), "");
    let url = |path: &str| format!("http://{}{path}", t.addr);
    let get = |path: &str, args: &[&str]| curl(args, &url(path));

    // Text, binary (beyond what goes out with the head), empty; on HTTP/1.1 and HTTP/2.
    for version in ["--http1.1", "--http2-prior-knowledge"] {
        let hello = get("/hello.txt", &[version]);
        assert_eq!(
            (hello.status, &hello.body[..]),
            (200, &b"hello\n"[..]),
            "{version}"
        );
        assert_eq!(hello.field("content-type"), "text/plain; charset=utf-8");
        assert_eq!(hello.field("accept-ranges"), "bytes");
        assert!(hello.field("etag").starts_with('"'), "{version}");
        assert!(hello.field("last-modified").ends_with("GMT"), "{version}");
        assert_eq!(hello.field("cache-control"), "", "none unless configured");
        let bin = get("/bin.dat", &[version]);
        assert_eq!(bin.status, 200);
        assert!(bin.body == binary, "{version}: the binary file's bytes");
        let empty = get("/empty.txt", &[version]);
        assert_eq!((empty.status, empty.body.len()), (200, 0));
        assert_eq!(empty.field("content-length"), "0");
        // HEAD: the length, no body.
        let head = get("/huge.bin", &[version, "-I"]);
        assert_eq!((head.status, head.body.len()), (200, 0), "{version}");
        assert_eq!(head.field("content-length"), "1073741824");
        // The end of the 1 GiB sparse file.
        let tail = get("/huge.bin", &[version, "-r", "1073741800-"]);
        assert_eq!(tail.status, 206);
        assert_eq!(tail.body, vec![0; 24]);
        assert_eq!(
            tail.field("content-range"),
            "bytes 1073741800-1073741823/1073741824"
        );
    }
    // The whole 1 GiB.
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{size_download}",
        ])
        .arg(url("/huge.bin"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200 1073741824");

    // Ranges.
    let part = get("/bin.dat", &["-r", "10-19"]);
    assert_eq!((part.status, &part.body[..]), (206, &binary[10..20]));
    assert_eq!(part.field("content-range"), "bytes 10-19/300000");
    let past = get("/bin.dat", &["-r", "300000-"]);
    assert_eq!(
        (past.status, past.field("content-range")),
        (416, "bytes */300000")
    );
    let many: Vec<String> = (0..1000).map(|i| format!("{i}-{}", i + 5)).collect();
    let many = format!("Range: bytes={}", many.join(","));
    let whole = get("/bin.dat", &["-H", &many]);
    assert_eq!((whole.status, whole.body.len()), (200, binary.len()));

    // Conditional requests.
    let first = get("/hello.txt", &[]);
    let (etag, date) = (first.field("etag"), first.field("last-modified"));
    let same = get("/hello.txt", &["-H", &format!("If-None-Match: {etag}")]);
    assert_eq!((same.status, same.body.len()), (304, 0));
    assert_eq!(same.field("etag"), etag);
    let weak = get(
        "/hello.txt",
        &["-H", &format!("If-None-Match: \"x\", W/{etag}")],
    );
    assert_eq!(weak.status, 304);
    let since = get("/hello.txt", &["-H", &format!("If-Modified-Since: {date}")]);
    assert_eq!(since.status, 304);
    let old = get(
        "/hello.txt",
        &["-H", "If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT"],
    );
    assert_eq!(old.status, 200);
    let stale = get("/bin.dat", &["-r", "0-1", "-H", "If-Range: \"other\""]);
    assert_eq!((stale.status, stale.body.len()), (200, binary.len()));
    let bin_tag = get("/bin.dat", &["-I"]).field("etag").to_string();
    let fresh = get(
        "/bin.dat",
        &["-r", "0-1", "-H", &format!("If-Range: {bin_tag}")],
    );
    assert_eq!((fresh.status, fresh.body.len()), (206, 2));

    // A directory: to its `/`, then its index; no listing.
    let moved = get("/docs?x=1", &[]);
    assert_eq!((moved.status, moved.field("location")), (301, "/docs/?x=1"));
    let index = get("/docs/", &[]);
    assert_eq!(
        (index.status, &index.body[..]),
        (200, &b"<h1>docs</h1>"[..])
    );
    assert_eq!(index.field("content-type"), "text/html; charset=utf-8");
    assert_eq!(get("/", &[]).status, 404, "no index, no listing");

    // Precompressed siblings by the client's Accept-Encoding; the route's Cache-Control.
    for (accept, body, coding) in [
        ("br", "brotli bytes", "br"),
        ("gzip, deflate, br", "brotli bytes", "br"),
        ("br;q=0.5, gzip", "gzip bytes", "gzip"),
        ("identity", "plain", ""),
        ("", "plain", ""),
    ] {
        let css = get(
            "/assets/site.css",
            &["-H", &format!("Accept-Encoding: {accept}")],
        );
        assert_eq!(String::from_utf8_lossy(&css.body), body, "{accept}");
        assert_eq!(css.field("content-encoding"), coding, "{accept}");
        assert_eq!(css.field("content-type"), "text/css; charset=utf-8");
        assert_eq!(css.field("vary"), "Accept-Encoding");
        assert_eq!(css.field("cache-control"), "public, max-age=60");
    }

    // What the exclusion turns away comes from the files; the rest of /app from Tomcat.
    let css = get("/app/static/app.css", &[]);
    assert_eq!(
        (css.status, &css.body[..]),
        (200, &b"body { color: red }"[..])
    );
    let app = get("/app/page", &[]);
    assert_eq!(app.status, 200);
    assert!(!app.field("set-cookie").is_empty(), "Tomcat answers /app");

    // Links, dot files, what is no regular file, other methods.
    assert_eq!(get("/inside", &[]).body, b"hello\n");
    for path in [
        "/outside",
        "/up/secret.txt",
        "/.git/config",
        "/fifo",
        "/nothing",
    ] {
        let got = get(path, &[]);
        assert_eq!(got.status, 404, "{path}");
        assert!(!String::from_utf8_lossy(&got.body).contains(SECRET));
    }
    let post = get("/hello.txt", &["-X", "POST", "-d", "x"]);
    assert_eq!((post.status, post.field("allow")), (405, "GET, HEAD"));

    // Hostile paths, byte for byte: refused, and nothing outside the root comes back.
    for path in [
        &b"/../secret.txt"[..],
        b"/%2e%2e/secret.txt",
        b"/%2E%2E/%2e%2e/secret.txt",
        b"/..%2fsecret.txt",
        b"/up/..%2f..%2fsecret.txt",
        b"/docs/..%5c..%5csecret.txt",
        b"/..\\secret.txt",
        b"/hello.txt%00.png",
        b"/%c0%ae%c0%ae/secret.txt",
        b"/%e0%80%ae%e0%80%ae/secret.txt",
        b"/app/static/../../../secret.txt",
        b"/assets/..%2f..%2fsecret.txt",
        b"/assets/../../secret.txt",
        b"/.%2e/secret.txt",
    ] {
        let (status, text) = raw_get(t.addr, path).await;
        let shown = String::from_utf8_lossy(path);
        assert!(
            status.starts_with("HTTP/1.1 400") || status.starts_with("HTTP/1.1 404"),
            "{shown}: {status}"
        );
        assert!(!text.contains(SECRET), "{shown}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_over_tls_on_http1_and_http2() {
    let dir = common::scratch_dir("files-tls");
    let binary = tree(&dir);
    let pki = Pki::new(&dir.join("pki"));
    let t = start(
        &dir,
        "      - { name: a, address: \"127.0.0.1:1\", route: a }\n",
        &pki.listener_tls(),
    );
    let url = format!("https://localhost:{}/bin.dat", t.addr.port());
    let ca = pki.path("ca.pem");
    for version in ["--http1.1", "--http2"] {
        let got = curl(&["--cacert", &ca, version], &url);
        assert_eq!(got.status, 200, "{version}");
        assert!(got.body == binary, "{version}: the file's bytes");
        let part = curl(&["--cacert", &ca, version, "-r", "299990-"], &url);
        assert_eq!((part.status, &part.body[..]), (206, &binary[299_990..]));
    }
}

/// The page comes from a server; its styles (precompressed) and image from the files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_gets_the_page_from_the_server_and_its_assets_from_files() {
    let dir = common::scratch_dir("files-browser");
    tree(&dir);
    let static_dir = dir.join("root/app/static");
    std::fs::write(
        static_dir.join("site.css"),
        "body { background-color: rgb(1, 2, 3); }\n".repeat(50),
    )
    .unwrap();
    assert!(Command::new("gzip")
        .arg("-k")
        .arg(static_dir.join("site.css"))
        .status()
        .unwrap()
        .success());
    std::fs::write(
        static_dir.join("logo.svg"),
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"20\" height=\"10\"><rect width=\"20\" height=\"10\"/></svg>",
    )
    .unwrap();
    let html = "<!doctype html><html><head><link rel=stylesheet href=\"/app/static/site.css\"></head>\
                <body><img id=logo src=\"/app/static/logo.svg\"><p id=from>tomcat</p></body></html>";
    let page = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n{html}",
        html.len()
    );
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server_addr = server.local_addr().unwrap();
    common::servers::fixed(server, Some(page.into_bytes()));
    let d = dir.display();
    let t = Tether::start_with(Opts {
        cluster: format!(
            "    servers:\n      - {{ name: page, address: \"{server_addr}\", route: page }}\n"
        ),
        no_default_cluster: true,
        listener_extra: format!(
            "    serve: {{ root: \"{d}/root\", precompressed: true }}\n    routes:\n\
             \x20     - {{ path: \"/app/*\", cluster: shop }}\n\
             \x20     - {{ path: \"/app/static/*\", cluster: shop, exclude: true }}\n"
        ),
        ..Opts::default()
    });
    let driver = common::webdriver::Driver::start();
    let c = driver.browser(800, 600).await;
    c.goto(&format!("http://{}/app/index.jsp", t.addr))
        .await
        .unwrap();
    common::webdriver::until(
        &c,
        "styles and image loaded",
        "const logo = document.getElementById('logo'); \
         return !!logo && logo.complete && logo.naturalWidth === 20 && \
         getComputedStyle(document.body).backgroundColor === 'rgb(1, 2, 3)' && \
         document.getElementById('from').textContent === 'tomcat'",
        std::time::Duration::from_secs(20),
    )
    .await;
    let css = curl(
        &["-H", "Accept-Encoding: gzip, deflate, br, zstd"],
        &format!("http://{}/app/static/site.css", t.addr),
    );
    assert_eq!(
        css.field("content-encoding"),
        "gzip",
        "what the browser was sent"
    );
    c.close().await.unwrap();
}

/// A small file (sent with the head) whose second half is not in the page cache: the read
/// from the cache stops short, and the rest comes from the disk, all before the answer goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_partly_in_the_page_cache_is_sent_whole() {
    use std::os::fd::AsRawFd;
    let dir = common::scratch_dir("files-half-cached");
    tree(&dir);
    let bytes: Vec<u8> = (0..12_288u32).map(|i| (i % 241) as u8).collect();
    let path = dir.join("root/half.bin");
    std::fs::write(&path, &bytes).unwrap();
    let t = start(
        &dir,
        "      - { name: a, address: \"127.0.0.1:1\", route: a }\n",
        "",
    );
    let url = format!("http://{}/half.bin", t.addr);
    for _ in 0..3 {
        let file = std::fs::File::open(&path).unwrap();
        file.sync_all().unwrap();
        // SAFETY: an open descriptor and a range of it; the call only advises the kernel.
        let r =
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 8192, 4096, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(r, 0);
        let got = curl(&["--http1.1"], &url);
        assert_eq!(got.status, 200);
        assert!(
            got.body == bytes,
            "{} of {} bytes",
            got.body.len(),
            bytes.len()
        );
    }
}
