//! HTTP/2 clients that attack the proxy, over h2c with hand-written frames: rapid reset,
//! a CONTINUATION flood, an HPACK bomb, PING and SETTINGS floods, more streams than
//! allowed, and a client that opens no window. Each attack is refused or cut off, the
//! memory tether holds stays bounded, and the next client is served. The suite's second
//! pass runs these against Pingora's HTTP/2 (`TETHER_HTTP2=proxy`) too.

mod common;

use common::h2frames::*;
use common::{server_line, tomcats, Opts, Tether};
use std::time::Duration;
use tokio::net::TcpStream;

const MIB: u64 = 1 << 20;

async fn start(limits: &str) -> (Tether, Vec<tether::cli::sim::TomcatSim>) {
    let sims = tomcats(1).await;
    let cluster = format!("    servers:\n{}", server_line(&sims[0], ""));
    let t = Tether::start_with(Opts {
        cluster,
        listener_extra: format!("    h2c: true\n{limits}"),
        metrics: true,
        ..Opts::default()
    });
    (t, sims)
}

async fn connect(t: &Tether, settings: &[(u16, u32)]) -> TcpStream {
    let mut s = TcpStream::connect(t.addr).await.unwrap();
    assert!(send(&mut s, &preface(settings), Duration::from_secs(5)).await);
    s
}

/// A new client is still served over HTTP/2.
async fn still_serves(t: &Tether) {
    let mut s = connect(t, &[]).await;
    let get = frame(HEADERS, END_HEADERS | END_STREAM, 1, &get("/after"));
    assert!(send(&mut s, &get, Duration::from_secs(5)).await);
    let mut buf = Vec::new();
    let answer = until(
        &mut s,
        &mut buf,
        HEADERS,
        Duration::from_secs(10),
        |_, _, _| {},
    )
    .await;
    let (_, stream, _) = answer.expect("a new client is answered");
    assert_eq!(stream, 1);
}

/// The error code of a GOAWAY or RST_STREAM payload.
fn code(kind: u8, payload: &[u8]) -> u32 {
    let at = if kind == GOAWAY { 4 } else { 0 };
    u32::from_be_bytes(payload[at..at + 4].try_into().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_ends_the_connection_and_spares_the_server() {
    let (t, sims) = start("").await;
    let mut s = connect(&t, &[]).await;
    let mut flood = Vec::new();
    for i in 0..5000u32 {
        let id = 1 + 2 * i;
        flood.extend(frame(HEADERS, END_HEADERS | END_STREAM, id, &get("/r")));
        flood.extend(frame(RST_STREAM, 0, id, &8u32.to_be_bytes()));
    }
    // The server may stop reading before the flood is all sent.
    send(&mut s, &flood, Duration::from_secs(10)).await;
    let mut buf = Vec::new();
    let goaway = until(
        &mut s,
        &mut buf,
        GOAWAY,
        Duration::from_secs(10),
        |_, _, _| {},
    )
    .await;
    let (_, _, payload) = goaway.expect("the connection is ended with GOAWAY");
    assert_eq!(code(GOAWAY, &payload), 0xb, "ENHANCE_YOUR_CALM");
    let reached = sims[0].requests();
    assert!(
        reached < 1000,
        "{reached} of 5000 reset streams reached the server"
    );
    still_serves(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuation_flood_is_cut_off_with_memory_bounded() {
    let (t, sims) = start("").await;
    let before = t.rss();
    let mut s = connect(&t, &[]).await;
    let mut first = get("/c");
    literal(&mut first, "x-a", &[b'a'; 1000]);
    assert!(
        send(
            &mut s,
            &frame(HEADERS, 0, 1, &first),
            Duration::from_secs(5)
        )
        .await
    );
    // 20 MB of CONTINUATION frames that never end the header block.
    let mut block = Vec::new();
    for _ in 0..15 {
        literal(&mut block, "x-flood", &[b'f'; 1000]);
    }
    let continuation = frame(CONTINUATION, 0, 1, &block);
    let mut sent = 0u64;
    while sent < 20 * MIB {
        if !send(&mut s, &continuation, Duration::from_secs(2)).await {
            break;
        }
        sent += continuation.len() as u64;
    }
    assert!(
        sent < 20 * MIB,
        "tether read a 20 MB header block to its end"
    );
    assert_eq!(sims[0].requests(), 0, "nothing of it reached the server");
    let grew = t.rss().saturating_sub(before);
    assert!(grew < 32 * MIB, "tether's memory grew {} MiB", grew / MIB);
    still_serves(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hpack_bomb_is_refused_before_it_is_decoded_whole() {
    let (t, sims) = start("").await;
    let before = t.rss();
    let mut s = connect(&t, &[]).await;
    // One 4 KiB field in the dynamic table, then a header block that names it 10,000 times:
    // 40 MB decoded from 10 KB sent.
    let mut block = get("/b");
    indexed_literal(&mut block, "x-bomb", &[b'b'; 4000]);
    for _ in 0..10_000 {
        indexed(&mut block, 62);
    }
    let mut frames = Vec::new();
    for (i, part) in block.chunks(16_000).enumerate() {
        let last = (i + 1) * 16_000 >= block.len();
        let kind = if i == 0 { HEADERS } else { CONTINUATION };
        let flags = if last { END_HEADERS | END_STREAM } else { 0 };
        frames.extend(frame(kind, flags, 1, part));
    }
    send(&mut s, &frames, Duration::from_secs(5)).await;
    let mut buf = Vec::new();
    // Refused: an answer of 431, a reset of the stream, or the connection ended.
    let mut refused = false;
    let got = until(
        &mut s,
        &mut buf,
        HEADERS,
        Duration::from_secs(10),
        |k, _, _| {
            refused |= k == RST_STREAM || k == GOAWAY;
        },
    )
    .await;
    if let Some((_, _, block)) = got {
        // 0x88 is `:status: 200`, from HPACK's static table.
        assert!(
            refused || !block.starts_with(&[0x88]),
            "the bomb was answered 200"
        );
    }
    assert_eq!(sims[0].requests(), 0, "nothing of it reached the server");
    let grew = t.rss().saturating_sub(before);
    assert!(grew < 32 * MIB, "tether's memory grew {} MiB", grew / MIB);
    still_serves(&t).await;
}

/// Floods the connection with `unit` (a PING or SETTINGS frame), reading nothing back:
/// what was sent before tether stopped reading, and its memory's growth.
async fn flood(t: &Tether, unit: &[u8]) -> (u64, u64) {
    let before = t.rss();
    let mut s = connect(t, &[]).await;
    let batch: Vec<u8> = unit.repeat(1000);
    let mut sent = 0u64;
    while sent < 50 * MIB {
        if !send(&mut s, &batch, Duration::from_secs(2)).await {
            break;
        }
        sent += batch.len() as u64;
    }
    (sent, t.rss().saturating_sub(before))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_and_settings_floods_hold_no_more_than_a_bounded_buffer() {
    let (t, _sims) = start("").await;
    let ping = frame(PING, 0, 0, &[7u8; 8]);
    let (sent, grew) = flood(&t, &ping).await;
    assert!(
        grew < 32 * MIB,
        "a PING flood grew tether by {} MiB",
        grew / MIB
    );
    assert!(
        sent < 50 * MIB,
        "tether read 50 MB of PINGs from a client that reads nothing"
    );
    let mut settings = Vec::new();
    settings.extend_from_slice(&4u16.to_be_bytes()); // INITIAL_WINDOW_SIZE
    settings.extend_from_slice(&65_535u32.to_be_bytes());
    let settings = frame(SETTINGS, 0, 0, &settings);
    let (sent, grew) = flood(&t, &settings).await;
    assert!(
        grew < 32 * MIB,
        "a SETTINGS flood grew tether by {} MiB",
        grew / MIB
    );
    assert!(
        sent < 50 * MIB,
        "tether read 50 MB of SETTINGS from a client that reads nothing"
    );
    still_serves(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_past_the_concurrent_bound_are_refused() {
    let (t, sims) = start("").await;
    let mut s = connect(&t, &[]).await;
    // 150 requests whose bodies never come: each stays open.
    let mut open = Vec::new();
    for i in 0..150u32 {
        let mut block = get("/open");
        literal(&mut block, "content-length", b"10");
        open.extend(frame(HEADERS, END_HEADERS, 1 + 2 * i, &block));
    }
    send(&mut s, &open, Duration::from_secs(5)).await;
    let mut buf = Vec::new();
    let mut refused = 0;
    until(
        &mut s,
        &mut buf,
        GOAWAY,
        Duration::from_secs(3),
        |k, _, p| {
            if k == RST_STREAM && code(RST_STREAM, p) == 0x7 {
                refused += 1;
            }
        },
    )
    .await;
    assert!(
        refused >= 50,
        "{refused} of the 50 streams past 100 refused (REFUSED_STREAM)"
    );
    assert_eq!(sims[0].requests(), 0);
    still_serves(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_opens_no_window_has_its_stream_reset() {
    let (t, _sims) = start("    limits: { send_timeout: 2s, send_grace: 1s }\n").await;
    // SETTINGS_INITIAL_WINDOW_SIZE 0: no byte of a body may be sent until the client
    // opens a window, which it never does.
    let mut s = connect(&t, &[(4, 0)]).await;
    let get = frame(HEADERS, END_HEADERS | END_STREAM, 1, &get("/bytes/1000000"));
    assert!(send(&mut s, &get, Duration::from_secs(5)).await);
    let mut buf = Vec::new();
    let start = std::time::Instant::now();
    let reset = until(
        &mut s,
        &mut buf,
        RST_STREAM,
        Duration::from_secs(15),
        |_, _, _| {},
    )
    .await;
    let (_, stream, _) = reset.expect("the stalled stream is reset");
    assert_eq!(stream, 1);
    assert!(
        start.elapsed() < Duration::from_secs(12),
        "reset after {:?}",
        start.elapsed()
    );
    still_serves(&t).await;
}
