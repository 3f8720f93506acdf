#![no_main]
//! The differential of tether's two HTTP/1 request parsers, coverage-guided:
//! every input is read by tether's engine and by pingora-core's session with tether's
//! checks (`tests/http1_diff/`, the harness `cargo test --test http1_differential` replays
//! on `tests/corpus/http1/`), and a difference that is not on purpose is a finding.

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/http1_diff/mod.rs"]
mod diff;

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
}

fuzz_target!(|input: &[u8]| {
    if let Some(difference) = RUNTIME.with(|rt| rt.block_on(diff::differ(input))) {
        panic!("{difference}");
    }
});
