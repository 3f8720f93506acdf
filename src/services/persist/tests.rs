//! Tests of saving and loading partition tables (`persist.rs`).

use super::*;
use crate::config;
use crate::routing::partition_key;

fn router(clones: &[&str]) -> ClusterRouter {
    router_max(clones, 100_000)
}

fn router_max(clones: &[&str], max: usize) -> ClusterRouter {
    let mut yaml = format!(
        "listeners: [{{ name: web, address: 127.0.0.1:1, cluster: was }}]\n\
         clusters:\n  - name: was\n    session_style: websphere\n\
         \x20   websphere: {{ partition_table_max: {max} }}\n    servers:\n",
    );
    for (i, c) in clones.iter().enumerate() {
        yaml.push_str(&format!(
            "      - {{ name: s{i}, address: 127.0.0.1:{}, clone_id: {c} }}\n",
            9000 + i
        ));
    }
    ClusterRouter::new(&config::parse(&yaml, "t").unwrap().clusters[0], None)
}

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tether-persist-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_saved_table_loads_into_a_fresh_process() {
    let d = dir("roundtrip");
    let path = table_path(&d, "was");
    let old = router(&["c1", "c2"]);
    old.learn_wspt(b"7329011=c1, -184020=c2, 42=c2");
    assert_eq!(save(&old, &path).unwrap(), 3);
    assert!(
        !path.with_extension("tsv.tmp").exists(),
        "temp file renamed away"
    );

    let fresh = router(&["c1", "c2"]);
    assert_eq!(load(&fresh, &path).unwrap(), 3);
    assert_eq!(fresh.partition_owner(b"7329011"), Some("c1"));
    assert_eq!(fresh.partition_owner(b"-184020"), Some("c2"));

    // A clone removed from the config loses its entries; the rest load.
    let smaller = router(&["c1"]);
    assert_eq!(load(&smaller, &path).unwrap(), 1);
    let _ = std::fs::remove_dir_all(d);
}

/// Junk a server announced, that no request used, is saved by the process that learned
/// it and by the next one while young, then dropped; used partitions stay saved.
#[test]
fn junk_no_request_used_does_not_outlive_a_process_that_ran_a_while() {
    let d = dir("junk");
    let path = table_path(&d, "was");
    let first = router(&["c1", "c2"]);
    first.learn_wspt(b"7329011=c1, 900=c2, 901=c2");
    first.partitions().unwrap().get(b"7329011"); // a request's look-up
    assert_eq!(
        save_with(&first, &path, false).unwrap(),
        3,
        "all learned here"
    );

    let second = router(&["c1", "c2"]);
    assert_eq!(load(&second, &path).unwrap(), 3);
    second.learn_wspt(b"901=c2"); // announced again
    assert_eq!(
        save(&second, &path).unwrap(),
        3,
        "a young process keeps all"
    );
    assert_eq!(save_with(&second, &path, false).unwrap(), 2, "900 dropped");

    let third = router(&["c1", "c2"]);
    assert_eq!(load(&third, &path).unwrap(), 2);
    let t = third.partitions().unwrap();
    assert_eq!(third.partition_owner(b"900"), None);
    assert_eq!(third.partition_owner(b"901"), Some("c2"));
    assert!(t.is_used(b"7329011"), "the mark survives restarts");
    assert!(!t.is_used(b"901"));
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn used_entries_load_first_and_old_files_load_as_unused() {
    let d = dir("sections");
    let path = table_path(&d, "was");
    std::fs::create_dir_all(&d).unwrap();
    let (a, b) = (partition_key(b"a"), partition_key(b"b"));
    let text = format!("{HEADER}\n{UNUSED}\n{a:016x}\tc1\n{USED}\n{b:016x}\tc1\n");
    std::fs::write(&path, text).unwrap();
    let small = router_max(&["c1"], 1);
    assert_eq!(load(&small, &path).unwrap(), 1);
    assert_eq!(small.partition_owner(b"b"), Some("c1"), "the used one fits");

    let old = format!("{HEADER}\n# cluster was\n{a:016x}\tc1\n");
    std::fs::write(&path, old).unwrap();
    let r = router(&["c1"]);
    assert_eq!(load(&r, &path).unwrap(), 1);
    assert!(!r.partitions().unwrap().is_used(b"a"));
    assert_eq!(
        save_with(&r, &path, false).unwrap(),
        0,
        "never used, dropped"
    );
    let _ = std::fs::remove_dir_all(d);
}

/// A table file as tether process `pid`, started at `started_ms`, would have written it.
fn write_as(path: &Path, pid: u32, started_ms: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text =
        format!("{HEADER}\n# cluster was\n{WRITER}{pid} {started_ms}\n0000000000000001\tc1\n");
    std::fs::write(path, text).unwrap();
}

fn sleeper() -> std::process::Child {
    std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap()
}

#[test]
fn an_old_process_leaves_the_table_to_a_newer_one_while_it_runs() {
    mark_start();
    let d = dir("newer");
    let path = table_path(&d, "was");
    let r = router(&["c1", "c2"]);
    r.learn_wspt(b"7329011=c2");
    let mut newer = sleeper();
    write_as(&path, newer.id(), *STARTED_MS + 1_000);
    let before = std::fs::read_to_string(&path).unwrap();

    assert_eq!(newer_owner(&path), Some(newer.id()));
    assert_eq!(save_if_ours(&r, &path).unwrap(), Err(newer.id()));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);

    // Once the newer process is gone (it crashed), this one saves again.
    newer.kill().unwrap();
    newer.wait().unwrap();
    assert_eq!(newer_owner(&path), None);
    assert_eq!(save_if_ours(&r, &path).unwrap(), Ok(1));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(&format!("{WRITER}{} ", std::process::id())),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn a_new_process_overwrites_the_table_of_an_older_one_still_draining() {
    mark_start();
    let d = dir("older");
    let path = table_path(&d, "was");
    let mut older = sleeper();
    write_as(&path, older.id(), 1);
    let r = router(&["c1", "c2"]);
    r.learn_wspt(b"7329011=c2, 42=c1");

    assert_eq!(newer_owner(&path), None);
    assert_eq!(save_if_ours(&r, &path).unwrap(), Ok(2));
    let fresh = router(&["c1", "c2"]);
    assert_eq!(load(&fresh, &path).unwrap(), 2);
    assert_eq!(fresh.partition_owner(b"7329011"), Some("c2"));
    older.kill().unwrap();
    older.wait().unwrap();
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn missing_or_corrupt_files_change_nothing() {
    let d = dir("corrupt");
    let path = table_path(&d, "was");
    let r = router(&["c1"]);
    assert!(matches!(load(&r, &path), Err(LoadError::Missing)));
    std::fs::create_dir_all(&d).unwrap();
    let cases = [
        "not a table\n".to_string(),
        format!("{HEADER}\n0000000000000001\tc1\nzzzz\tc1\n"),
        format!("{HEADER}\n0000000000000001 c1\n"),
        format!("{HEADER}\n0000000000000000\tc1\n"),
        String::new(),
    ];
    for text in cases {
        std::fs::write(&path, &text).unwrap();
        assert!(
            matches!(load(&r, &path), Err(LoadError::Corrupt(_))),
            "{text:?}"
        );
        assert_eq!(r.partitions().unwrap().len(), 0, "{text:?}");
    }
    let _ = std::fs::remove_dir_all(d);
}
