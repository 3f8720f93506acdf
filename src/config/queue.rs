//! A server's `max_inflight` (the cluster's, or its own), and `clusters[].queue`: how many
//! requests may wait for a slot on a server at its bound, and for how long.

use super::check::Check;
use super::model::{Queue, MAX_INFLIGHT_LIMIT, QUEUE_LENGTH_LIMIT};
use super::raw::RawQueue;
use std::time::Duration;

/// Requests that may wait for one server by default.
const DEFAULT_LENGTH: u32 = 1000;
/// How long a request waits for a slot by default (HAProxy's usual `timeout queue`).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) fn queue(raw: Option<&RawQueue>, path: &str, check: &mut Check) -> Queue {
    let length = raw.and_then(|q| q.length).unwrap_or(DEFAULT_LENGTH);
    if length > QUEUE_LENGTH_LIMIT {
        check.err(
            format!("{path}.queue.length"),
            format!("must be between 0 and {QUEUE_LENGTH_LIMIT}"),
        );
    }
    let timeout = check.duration(
        format!("{path}.queue.timeout"),
        raw.and_then(|q| q.timeout.as_deref()),
        DEFAULT_TIMEOUT,
        Duration::from_millis(1)..=Duration::from_secs(3600),
    );
    Queue { length, timeout }
}

/// `raw` (a server's or the cluster's `max_inflight` at `path`), else `default`; a value
/// out of range is said once, where it is written.
pub(super) fn max_inflight(raw: Option<u32>, default: u32, path: &str, check: &mut Check) -> u32 {
    let Some(v) = raw else { return default };
    if v > MAX_INFLIGHT_LIMIT {
        check.err(
            format!("{path}.max_inflight"),
            format!("must be between 0 (no bound) and {MAX_INFLIGHT_LIMIT}"),
        );
    }
    v
}
