//! Fleet sync lag against the rate partitions are learned at, for `bench/fleet`.
//!
//! Two modes of one program:
//!
//! ```sh
//! # A WebSphere-like backend: every response announces `--fresh` (64) partitions no
//! # response announced before, over the clone ids given (one listener per clone id).
//! fleet_lag serve --listen 127.0.0.1:8081,127.0.0.1:8082 --clones c1,c2
//!
//! # Drives tether A (its proxy port) so that it learns each rate's partitions per minute,
//! # samples A's and B's /metrics every 100 ms and B's table size (admin API) every 10 ms,
//! # and prints the lag and CPU tables.
//! fleet_lag drive --proxy 127.0.0.1:8080 --metrics-a 127.0.0.1:9091 \
//!     --metrics-b 127.0.0.1:9092 --admin-b 127.0.0.1:9002 --pids A_PID,B_PID,REDIS_PID \
//!     --rates 10000,100000,1000000 --seconds 25 --raw samples.tsv
//! ```
//!
//! Lag is "how long after A had learned N partitions B had applied N", measured twice:
//!
//! - from the 100 ms samples (`--sample-ms`): A's `tether_wspt_entries_learned_total` and
//!   B's `tether_shared_state_applied_total{kind="partition"}`, both counted from the
//!   phase's start; for every level N A's samples show, the times A and B reached N are
//!   interpolated between the samples around them. Lags shorter than the sampling interval
//!   mostly read 0 here: both curves pass N between the same two samples.
//! - finely: A reached 64·k partitions when the k-th response came back (A learns a
//!   response's partitions before it forwards the response), and B's count is its partition
//!   table's size from `GET /status` every 10 ms (`--fine-ms`; B learns nothing itself).
//!
//! B's own `tether_shared_state_lag_seconds` (from the change's version, its learning on A,
//! to B's applying it, for the last event B applied) is reported from the 100 ms samples as well, and the CPU of Redis, A and B
//! (all threads, and the fleet's `BG fleet` thread) from /proc.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tether::cli::sim::HttpClient;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

pub(crate) type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

pub(crate) fn usage() -> ! {
    eprintln!(
        "usage: fleet_lag serve --listen ADDR[,ADDR...] --clones ID[,ID...] [--fresh 64]\n       \
         fleet_lag drive --proxy ADDR --metrics-a ADDR --metrics-b ADDR [--admin-b ADDR]\n       \
         \x20   [--pids A,B,REDIS] [--rates 10000,100000,1000000] [--seconds 25] [--catch-up 30]\n       \
         \x20   [--workers 8] [--fresh 64] [--sample-ms 100] [--fine-ms 10] [--raw FILE]"
    );
    std::process::exit(2)
}

/// `--name value` pairs.
pub(crate) fn flags(args: &[String]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut it = args.iter();
    while let Some(k) = it.next() {
        let Some(name) = k.strip_prefix("--") else {
            usage()
        };
        let Some(v) = it.next() else { usage() };
        out.insert(name.to_string(), v.clone());
    }
    out
}

pub(crate) fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(mode) = args.first() else { usage() };
    let f = flags(&args[1..]);
    match mode.as_str() {
        "serve" => serve(&f).await,
        "drive" => drive(&f).await,
        _ => usage(),
    }
}

// --- the backend ---------------------------------------------------------------------------

mod drive;
mod report;
mod serve;

use drive::drive;
use serve::serve;
