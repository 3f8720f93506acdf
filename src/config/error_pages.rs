//! `error_pages`: files tether answers with instead of its one-line plain-text bodies, per
//! listener, route and cluster (Apache's `ErrorDocument`), keyed by a status (`503`) or a
//! class (`5xx`). Read when the config loads (a reload reads them again), so an answer
//! never touches the disk.

use super::check::Check;
use serde_yaml::{Mapping, Value};
use std::sync::Arc;

/// The largest page (a page is an answer's whole body, kept in memory).
const MAX_PAGE: u64 = 1 << 20;

/// One page: its bytes and their media type (by the file's extension).
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub body: Arc<[u8]>,
    pub content_type: &'static str,
}

/// A listener's, route's or cluster's pages.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ErrorPages {
    /// By status; a class (`5xx`) is stored under its first status with `class` set.
    exact: Vec<(u16, Page)>,
    class: Vec<(u16, Page)>,
}

impl ErrorPages {
    /// The page for `status`: its own, else its class's.
    pub fn page(&self, status: u16) -> Option<&Page> {
        find(&self.exact, status).or_else(|| find(&self.class, status / 100))
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.class.is_empty()
    }
}

fn find(list: &[(u16, Page)], key: u16) -> Option<&Page> {
    list.iter().find(|(k, _)| *k == key).map(|(_, p)| p)
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()) {
        Some(e) if e == "html" || e == "htm" => "text/html; charset=utf-8",
        Some(e) if e == "json" => "application/json",
        Some(e) if e == "xml" => "application/xml",
        _ => "text/plain; charset=utf-8",
    }
}

/// Validates and reads `raw` (at `path`).
pub(super) fn error_pages(
    raw: Option<&Mapping>,
    path: &str,
    check: &mut Check,
) -> Option<ErrorPages> {
    let raw = raw?;
    let mut out = ErrorPages::default();
    for (key, file) in raw {
        let key = match key {
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.clone(),
            _ => String::new(),
        };
        let field = format!("{path}.error_pages.{key}");
        let Value::String(file) = file else {
            check.err(field, "the path of a file");
            continue;
        };
        let status = key.parse::<u16>().ok().filter(|s| (400..=599).contains(s));
        let class = match key.as_bytes() {
            [d @ (b'4' | b'5'), b'x' | b'X', b'x' | b'X'] => Some(u16::from(d - b'0')),
            _ => None,
        };
        if status.is_none() && class.is_none() {
            check.err(field, format!("`{key}`: a status 400-599, or 4xx or 5xx"));
            continue;
        }
        let body = match std::fs::metadata(file) {
            Ok(m) if m.len() > MAX_PAGE => {
                check.err(field, format!("`{file}` is larger than 1 MiB"));
                continue;
            }
            Ok(_) => std::fs::read(file),
            Err(e) => Err(e),
        };
        let body = match body {
            Ok(b) => b,
            Err(e) => {
                check.err(field, format!("`{file}` cannot be read: {e}"));
                continue;
            }
        };
        let page = Page {
            body: body.into(),
            content_type: content_type(file),
        };
        match (status, class) {
            (Some(s), _) => out.exact.push((s, page)),
            (None, Some(c)) => out.class.push((c, page)),
            (None, None) => {}
        }
    }
    Some(out)
}
