//! Request bodies larger than the part tether reads before connecting: the
//! first 60 KiB of large and chunked bodies are read first, with the connection's reads
//! capped so that Pingora's retry buffer never overflows; every byte must still arrive, in
//! order, whatever the chunking. (Its own binary: the load of a megabyte upload beside
//! `tests/engine_handover.rs`'s WebSocket test makes Pingora's upgrade race show more often.)

mod common;

use common::recording::recording_server;
use common::{Opts, Tether};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bodies larger than the part read before connecting (the first 60 KiB of
/// large and chunked bodies are read first, the connection's reads capped so Pingora's
/// retry buffer never overflows): every byte arrives, in order, whatever the chunking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_past_the_part_read_first_arrive_whole() {
    let (server, seen) = recording_server().await;
    let t = Tether::start_with(Opts {
        cluster: format!("    servers:\n      - {{ name: s1, address: \"{server}\" }}\n"),
        ..Opts::default()
    });
    let body: Vec<u8> = (0..1_000_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    // Chunked, in chunks of uneven sizes, written in bursts of several chunks.
    let mut chunked = Vec::new();
    let mut at = 0;
    for size in [1usize, 7, 4096, 65_536, 70_000, 3, 100_000].iter().cycle() {
        if at == body.len() {
            break;
        }
        let n = (*size).min(body.len() - at);
        chunked.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        chunked.extend_from_slice(&body[at..at + n]);
        chunked.extend_from_slice(b"\r\n");
        at += n;
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let cases: [(&str, usize, bool); 4] = [
        ("chunked 1 MB", body.len(), true),
        ("70 kB", 70_000, false),
        ("61,441 bytes", 61_441, false),
        ("1 MB", body.len(), false),
    ];
    for (what, len, is_chunked) in cases {
        let mut s = TcpStream::connect(t.addr).await.unwrap();
        let framing = if is_chunked {
            "Transfer-Encoding: chunked".to_string()
        } else {
            format!("Content-Length: {len}")
        };
        let head =
            format!("POST /up HTTP/1.1\r\nHost: shop\r\n{framing}\r\nConnection: close\r\n\r\n");
        let mut wire = head.into_bytes();
        wire.extend_from_slice(if is_chunked { &chunked } else { &body[..len] });
        for burst in wire.chunks(150_000) {
            s.write_all(burst).await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).await.unwrap();
        assert!(
            answer.starts_with(b"HTTP/1.1 200"),
            "{what}: {}",
            String::from_utf8_lossy(&answer)
        );
        let got = seen.lock().unwrap().last().unwrap().body.clone();
        assert_eq!(got.len(), len, "{what}");
        assert!(got == body[..len], "{what}: the bytes arrive in order");
    }
}
