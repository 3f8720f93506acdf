#![no_main]
//! `jk_import`: the property `tests/fuzz_props/mod.rs` states for it, coverage-guided;
//! `cargo test --test fuzz_corpus` replays its seeds in `tests/corpus/jk_import/`.

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/fuzz_props/mod.rs"]
mod props;

fuzz_target!(|input: &[u8]| props::jk_import(input));
