//! The Debian package, as an operator meets it: `packaging/deb/build --dev`
//! makes it, `dpkg -i` installs it on this machine, the installed `tether -t` accepts the
//! installed `/etc/tether/tether.yaml`, the service's user exists, `dpkg -r` removes the
//! program and keeps the (edited) config, `dpkg -P` removes the config too.
//!
//! It needs `dpkg` and root (or `sudo -n`); `./run test` runs as root and installs
//! cargo-deb. It skips, saying why, where there is no dpkg, or where a package named
//! `tether` is installed already (an operator's: this test does not replace it).
//!
//! The manual in the package holds together: every relative link of every `.md` file it
//! ships leads to a file inside the package (an operator reading the installed
//! `/usr/share/doc/tether/` has no source tree). That check extracts the package with
//! `dpkg-deb -x` (no root, nothing installed); the package is built once for all the tests.

mod common;

use common::markdown::links;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Runs `args` as root (directly when root, else through `sudo -n`).
fn root(args: &[&str]) -> Output {
    let is_root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if is_root {
        Command::new(args[0])
    } else {
        let mut c = Command::new("sudo");
        c.arg("-n").arg(args[0]);
        c
    };
    cmd.args(&args[1..]).output().expect("run a command")
}

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn ok(args: &[&str]) -> String {
    let o = root(args);
    assert!(o.status.success(), "{args:?} failed:\n{}", said(&o));
    said(&o)
}

/// The newest `.deb` in `dir`.
fn newest_deb(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("a .deb was built")
}

fn have_dpkg() -> bool {
    Command::new("dpkg-deb").arg("--version").output().is_ok()
}

/// The package `packaging/deb/build --dev` makes, built once for all the tests here.
fn built_deb() -> &'static Path {
    static DEB: OnceLock<PathBuf> = OnceLock::new();
    DEB.get_or_init(|| {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let build = Command::new(repo.join("packaging/deb/build"))
            .arg("--dev")
            .output()
            .expect("run packaging/deb/build");
        assert!(
            build.status.success(),
            "packaging/deb/build --dev:\n{}",
            said(&build)
        );
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join("target"));
        let deb = newest_deb(&target.join("debian"));
        let name = deb.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&format!("tether_{}-", env!("CARGO_PKG_VERSION"))),
            "{name}"
        );
        deb
    })
}

#[test]
fn the_package_installs_checks_its_config_and_removes_keeping_it() {
    if Command::new("dpkg").arg("--version").output().is_err() {
        println!("skipped: no dpkg on this machine");
        return;
    }
    let installed = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "tether"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false);
    if installed {
        println!("skipped: a package named tether is installed here already");
        return;
    }
    let deb = built_deb().to_str().unwrap();

    // What is in it.
    let contents = ok(&["dpkg-deb", "--contents", deb]);
    for path in [
        "./usr/bin/tether",
        "./lib/systemd/system/tether.service",
        "./etc/tether/tether.yaml",
        "./etc/logrotate.d/tether",
        "./usr/share/doc/tether/README.md",
    ] {
        assert!(
            contents.contains(path),
            "{path} in the package:\n{contents}"
        );
    }
    let conffiles = ok(&["dpkg-deb", "--info", deb, "conffiles"]);
    assert!(conffiles.contains("/etc/tether/tether.yaml"), "{conffiles}");

    // Installed.
    ok(&["dpkg", "-i", deb]);
    let cleanup = Purge;
    assert!(Path::new("/usr/bin/tether").exists());
    let checked = ok(&["/usr/bin/tether", "-t", "-c", "/etc/tether/tether.yaml"]);
    println!("tether -t on the installed config: {}", checked.trim());
    let user = Command::new("getent")
        .args(["passwd", "tether"])
        .output()
        .unwrap();
    assert!(user.status.success(), "the tether user exists");
    let unit = std::fs::read_to_string("/lib/systemd/system/tether.service").unwrap();
    assert!(
        unit.contains("ExecStart=/usr/bin/tether -c /etc/tether/tether.yaml"),
        "{unit}"
    );
    assert!(!unit.contains("/usr/local/bin"), "{unit}");
    let mode = ok(&["stat", "-c", "%U:%G %a", "/etc/tether/tether.yaml"]);
    assert_eq!(
        mode.trim(),
        "root:tether 640",
        "the config is readable by the service"
    );
    let config = std::fs::read_to_string("/etc/tether/tether.yaml").unwrap();
    assert!(
        config.contains("pid_file: /run/tether/tether.pid"),
        "{config}"
    );
    assert!(config.contains("state_dir: /var/lib/tether"), "{config}");

    // The operator edits the config; removing the package keeps it.
    ok(&[
        "sh",
        "-c",
        "echo '# edited by the operator' >> /etc/tether/tether.yaml",
    ]);
    ok(&["dpkg", "-r", "tether"]);
    assert!(
        !Path::new("/usr/bin/tether").exists(),
        "the program is gone"
    );
    let kept = std::fs::read_to_string("/etc/tether/tether.yaml").expect("the config is kept");
    assert!(
        kept.ends_with("# edited by the operator\n"),
        "as the operator left it"
    );

    // Purging removes it.
    ok(&["dpkg", "-P", "tether"]);
    assert!(!Path::new("/etc/tether/tether.yaml").exists(), "purged");
    drop(cleanup);
}

/// Purges the package however the test ends.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        let _ = root(&["dpkg", "-P", "tether"]);
    }
}

/// A directory under the system's temporary directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("tether-deb-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The package's files, as `dpkg-deb -x` lays them out under `dir` (no root needed).
fn extract(deb: &Path, dir: &Path) {
    let o = Command::new("dpkg-deb")
        .arg("-x")
        .arg(deb)
        .arg(dir)
        .output()
        .expect("run dpkg-deb -x");
    assert!(o.status.success(), "dpkg-deb -x:\n{}", said(&o));
}

/// The `.md` files under `dir`, sorted.
fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
            if kind.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The relative links of the Markdown files in the package extracted at `root` that lead
/// nowhere inside it, each said as `file: target (why)`, and how many relative links were
/// checked. A link leads somewhere when, without its `#anchor`, it names a file (or a
/// directory that is not empty) inside `root`; a link starting with `/` is read from the
/// package's root. Web, `mailto:` and pure `#anchor` links are not checked.
fn dead_links(root: &Path) -> (Vec<String>, usize) {
    let root = root.canonicalize().unwrap();
    let mut dead = Vec::new();
    let mut checked = 0;
    for file in markdown_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        for target in links(&text) {
            let path = target.split('#').next().unwrap();
            if path.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let dest = match path.strip_prefix('/') {
                Some(absolute) => root.join(absolute),
                None => file.parent().unwrap().join(path),
            };
            let why = match dest.canonicalize() {
                Err(_) => Some("no such file in the package"),
                Ok(real) if !real.starts_with(&root) => Some("outside the package"),
                Ok(real) if real.is_file() => None,
                Ok(real) if real.is_dir() => std::fs::read_dir(&real)
                    .unwrap()
                    .next()
                    .is_none()
                    .then_some("an empty directory"),
                Ok(_) => Some("not a file"),
            };
            if let Some(why) = why {
                dead.push(format!("{shown}: {target} ({why})"));
            }
        }
    }
    (dead, checked)
}

#[test]
fn every_link_in_the_packaged_manual_leads_to_a_file_in_the_package() {
    if !have_dpkg() {
        println!("skipped: no dpkg-deb on this machine");
        return;
    }
    let scratch = Scratch::new("links");
    extract(built_deb(), &scratch.0);
    let doc = scratch.0.join("usr/share/doc/tether");
    for shipped in ["README.md", "docs/SUMMARY.md", "docs/img/console.png"] {
        assert!(doc.join(shipped).is_file(), "{shipped} in the package");
    }
    let files = markdown_files(&scratch.0);
    assert!(files.len() >= 20, "the manual's files: {files:?}");
    let (dead, checked) = dead_links(&scratch.0);
    assert!(checked >= 100, "the manual's relative links: {checked}");
    assert!(
        dead.is_empty(),
        "{} dead links in the package (ship the target at the path the link expects, in \
         Cargo.toml's [package.metadata.deb] assets, or name a source file in backquotes \
         instead of linking it):\n{}",
        dead.len(),
        dead.join("\n")
    );
    // Lean: the manual names source files and tests, it does not ship them.
    for tree in ["src", "tests"] {
        assert!(!doc.join(tree).exists(), "{tree}/ is not in the package");
    }
}

#[test]
fn a_dead_link_in_a_copy_of_the_package_is_reported() {
    if !have_dpkg() {
        println!("skipped: no dpkg-deb on this machine");
        return;
    }
    let scratch = Scratch::new("dead-links");
    extract(built_deb(), &scratch.0);
    let doc = scratch.0.join("usr/share/doc/tether");
    // Break the copy: an image two chapters show is gone, and a chapter gains links to
    // nowhere, out of the package, and (in code, so not a link) to nowhere again.
    std::fs::remove_file(doc.join("docs/img/console.png")).unwrap();
    let install = doc.join("docs/install.md");
    // Enough `..` to leave any temporary directory for the machine's /etc/passwd.
    let out = format!("{}etc/passwd", "../".repeat(32));
    let mut text = std::fs::read_to_string(&install).unwrap();
    text.push_str(&format!(
        "\nSee [gone](../nowhere.md#somewhere), [out]({out}), `[code](absent.md)`, \
         [web](https://example.com/absent.md) and [here](#install).\n"
    ));
    std::fs::write(&install, text).unwrap();
    let (dead, _) = dead_links(&scratch.0);
    let missing = "no such file in the package";
    assert_eq!(
        dead,
        [
            format!("usr/share/doc/tether/README.md: docs/img/console.png ({missing})"),
            format!("usr/share/doc/tether/docs/health-and-admin.md: img/console.png ({missing})"),
            format!("usr/share/doc/tether/docs/install.md: ../nowhere.md#somewhere ({missing})"),
            format!("usr/share/doc/tether/docs/install.md: {out} (outside the package)"),
        ],
    );
}

#[test]
fn the_link_reader_takes_links_and_images_outside_code() {
    let text = "![alt](img/a.png) [t](b.md#x \"title\") [u](<c d.md>) `[no](e.md)`\n\
                ```\n[no](f.md)\n```\n[v](g.md)";
    assert_eq!(links(text), ["img/a.png", "b.md#x", "c d.md", "g.md"]);
}
