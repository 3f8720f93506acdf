//! The Debian package, as an operator meets it: `packaging/deb/build --dev`
//! makes it, `dpkg -i` installs it on this machine, the installed `tether -t` accepts the
//! installed `/etc/tether/tether.yaml`, the service's user exists, `dpkg -r` removes the
//! program and keeps the (edited) config, `dpkg -P` removes the config too.
//!
//! It needs `dpkg` and root (or `sudo -n`); `./run test` runs as root and installs
//! cargo-deb. It skips, saying why, where there is no dpkg, or where a package named
//! `tether` is installed already (an operator's: this test does not replace it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
    let deb = deb.to_str().unwrap();

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
