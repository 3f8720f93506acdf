//! The two HTTP/1 request parsers tether runs, side by side in this process, on the same
//! bytes: tether's engine (`tether::wire::http1`: the head, the framing policy, the chunked
//! decoder) and pingora-proxy's path (pingora-core's HTTP/1 session, then the same policy
//! on the head it parsed, `proxy::request_checks`). Both must take the same first request
//! (method, target, version, fields, body bytes) or both take none. Inputs: the corpus in
//! `tests/corpus/http1/` (one stream per file; add what a fuzzer finds there), then
//! mutations of it from a fixed seed (`HTTP1_DIFF_ROUNDS`, default 20,000), so every
//! `cargo test` replays the same streams. Where the two differ on purpose the test says
//! which and why ([`on_purpose`]); every other difference fails with the input.
//!
//! `tests/engine_differential.rs` does the same through two real tether processes, for
//! whole streams and what reaches the server.

#[path = "http1_diff/mod.rs"]
mod diff;

use diff::{differ, engine, on_purpose, pingora};

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/http1");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_corpus_reads_the_same_in_both_parsers() {
    let corpus = corpus();
    assert!(corpus.len() >= 20, "the corpus is in tests/corpus/http1");
    let mut taken = 0;
    for (name, input) in &corpus {
        if let Some(d) = differ(input).await {
            panic!("{name}: {d}");
        }
        taken += usize::from(engine(input).is_ok());
    }
    // Both kinds are in the corpus: requests taken, and refused.
    assert!(
        taken > 0 && taken < corpus.len(),
        "{taken} of {} taken",
        corpus.len()
    );
}

/// A small deterministic generator (xorshift64*), so that a failure names a round that
/// replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Bytes and pieces that matter to HTTP/1 framing, for insertions.
const PIECES: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b" ",
    b"\t",
    b":",
    b",",
    b";",
    b"0",
    b"5",
    b"f",
    b"\0",
    b"Content-Length: 5\r\n",
    b"Content-Length: 05\r\n",
    b"Content-Length: 5, 5\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: gzip, chunked\r\n",
    b"Transfer-Encoding: chunked, gzip\r\n",
    b"Host: b\r\n",
    b"Connection: close\r\n",
    b"0\r\n\r\n",
    b"5\r\nhello\r\n",
    b"5;ext=1\r\nhello\r\n",
    b"HTTP/1.0",
    b"HTTP/1.1",
];

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(out.len() + 1);
        match rng.below(5) {
            0 if !out.is_empty() => {
                let end = (at + 1 + rng.below(8)).min(out.len());
                out.drain(at.min(end)..end);
            }
            1 if at < out.len() => out[at] = rng.next() as u8,
            2 if at < out.len() => out[at] = out[at].to_ascii_uppercase(),
            _ => {
                let piece = PIECES[rng.below(PIECES.len())];
                out.splice(at..at, piece.iter().copied());
            }
        }
    }
    out
}

#[tokio::test]
async fn mutations_of_the_corpus_read_the_same_in_both_parsers() {
    let corpus = corpus();
    let rounds: usize = std::env::var("HTTP1_DIFF_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut rng = Rng(0x7e7e_7e7e_1234_5678);
    let (mut taken, mut meant) = (0, 0);
    for round in 0..rounds {
        let (name, input) = &corpus[rng.below(corpus.len())];
        let input = mutate(&mut rng, input);
        let (e, p) = (engine(&input), pingora(&input).await);
        if on_purpose(&input, &e, &p).is_some() {
            meant += 1;
        }
        if let Some(d) = differ(&input).await {
            panic!("round {round}, from {name}: {d}");
        }
        taken += usize::from(e.is_ok());
    }
    println!("{rounds} mutated streams: {taken} taken by both, {meant} differing on purpose");
}
