//! Replays every fuzz target's seed corpus (`tests/corpus/<target>/`, with what the fuzzers
//! found added as regression cases) through the target's property (`tests/fuzz_props/`),
//! so that `cargo test` and CI check them without a fuzzer. `bench/fuzz` runs the targets
//! themselves under libFuzzer.

#[path = "fuzz_props/mod.rs"]
mod props;

#[test]
fn every_seed_keeps_its_targets_property() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    // Every seed is replayed, and every one that breaks its property is named (each one's
    // panic message is printed above the list).
    let mut broken = Vec::new();
    for (target, property) in props::TARGETS {
        let dir = root.join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(files.len() >= 3, "{target}: a seed corpus of a few files");
        for file in &files {
            let input = std::fs::read(file).unwrap();
            let outcome = std::panic::catch_unwind(|| property(&input));
            if outcome.is_err() {
                broken.push(format!("{target}: {}", file.display()));
            }
        }
        println!("{target}: {} seeds", files.len());
    }
    assert!(
        broken.is_empty(),
        "seeds that break their property:\n{}",
        broken.join("\n")
    );
}

/// The properties are not vacuous: each fails on an input that breaks it.
#[test]
fn the_glob_property_catches_a_wrong_matcher() {
    // A pattern and text where a matcher without backtracking would be wrong still pass.
    props::route_glob(b"*ab\n----\naab");
    // The reference itself: `?` needs one byte.
    let outcome = std::panic::catch_unwind(|| props::check_glob(b"a?", b"a", true));
    assert!(outcome.is_err());
}
