//! `compress:`: the servers' answers compressed for the clients that take it (mod_deflate,
//! nginx's `gzip`, HAProxy's `compression`), per listener and per route.

use super::check::Check;
use serde::Deserialize;
use std::sync::Arc;

/// `compress:` as written.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawCompress {
    pub types: Option<Vec<String>>,
    pub min_size: Option<u64>,
    pub gzip: Option<u32>,
    pub br: Option<u32>,
    pub zstd: Option<u32>,
}

/// Which answers are compressed, and how hard.
#[derive(Debug, Clone, PartialEq)]
pub struct Compress {
    /// Media types (lower case, without parameters) compressed; a `text/*` entry takes a
    /// whole top-level type.
    pub types: Vec<String>,
    /// An answer whose `Content-Length` is below this goes as it is (one of unknown length
    /// is compressed).
    pub min_size: u64,
    /// Each coding's level; 0: the coding is not offered.
    pub gzip: u32,
    pub br: u32,
    pub zstd: u32,
}

/// The media types compressed unless `types` says otherwise: text a browser fetches, none
/// that is compressed already (images, fonts in WOFF2, archives).
pub const DEFAULT_TYPES: &[&str] = &[
    "text/html",
    "text/css",
    "text/plain",
    "text/xml",
    "text/javascript",
    "application/javascript",
    "application/json",
    "application/xml",
    "application/xhtml+xml",
    "application/rss+xml",
    "application/atom+xml",
    "image/svg+xml",
];

/// Validates `raw` at `path`.
pub(super) fn compress(raw: &RawCompress, path: &str, check: &mut Check) -> Arc<Compress> {
    let types: Vec<String> = match &raw.types {
        Some(types) => types
            .iter()
            .map(|t| t.trim().to_ascii_lowercase())
            .collect(),
        None => DEFAULT_TYPES.iter().map(|t| t.to_string()).collect(),
    };
    for (i, t) in types.iter().enumerate() {
        let valid = t
            .split_once('/')
            .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty() && !t.contains([';', ' ']));
        if !valid {
            check.err(
                format!("{path}.types[{i}]"),
                format!("`{t}` is not a media type (`text/html`, `text/*`)"),
            );
        }
    }
    let level = |field: &str, value: Option<u32>, default: u32, most: u32, check: &mut Check| {
        value.map_or(default, |v| {
            check.count(format!("{path}.{field}"), v, 0..=most)
        })
    };
    Arc::new(Compress {
        types,
        min_size: raw.min_size.unwrap_or(256),
        gzip: level("gzip", raw.gzip, 6, 9, check),
        br: level("br", raw.br, 4, 11, check),
        zstd: level("zstd", raw.zstd, 3, 19, check),
    })
}
