//! What a file answer says, decided once for every front end: its status (200, 206, 304,
//! 416) by the request's conditions and range, and its fields, which each front end puts on
//! its own wire ([`Served::fields`]).

use super::body::Body;
use super::open::Opened;
use super::range::{self, Range};
use crate::config::Files;
use crate::routing::Fields;
use http::header::{IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, RANGE};
use std::io::Write;
use std::time::{Duration, SystemTime};

/// A file answer: its head's facts, and the body to send (none for `HEAD`, 304, 416).
pub struct Served<'f> {
    pub status: u16,
    /// `Content-Length`; `None` for a 304, which has none.
    pub length: Option<u64>,
    pub body: Option<Body>,
    content_type: &'static str,
    coding: Option<&'static str>,
    etag: Text<24>,
    modified: Text<29>,
    /// `bytes a-b/size` (206) or `bytes */size` (416).
    content_range: Option<Text<64>>,
    cache_control: Option<&'f str>,
    vary: bool,
}

/// A short field value built on the stack.
#[derive(Clone, Copy)]
struct Text<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Text<N> {
    fn of(args: std::fmt::Arguments<'_>) -> Text<N> {
        let mut bytes = [0; N];
        let mut w = &mut bytes[..];
        let _ = w.write_fmt(args);
        let len = N - w.len();
        Text { bytes, len }
    }

    fn get(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl<'f> Served<'f> {
    /// The answer `file` makes to a request with `fields`; `head`: a `HEAD` request.
    pub fn decide(files: &'f Files, file: Opened, head: bool, fields: &impl Fields) -> Served<'f> {
        let size = file.size;
        let etag = Text::of(format_args!("\"{:x}-{:x}\"", file.modified, size));
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(file.modified.max(0) as u64);
        let modified = Text::of(format_args!("{}", httpdate::HttpDate::from(time)));
        let mut served = Served {
            status: 200,
            length: Some(size),
            body: None,
            content_type: file.content_type,
            coding: file.coding.map(|c| c.name()),
            etag,
            modified,
            content_range: None,
            cache_control: files.cache_control.as_deref(),
            vary: files.precompressed,
        };
        if unchanged(fields, etag.get(), file.modified) {
            served.status = 304;
            served.length = None;
            return served;
        }
        let asked = fields
            .first(&RANGE)
            .filter(|_| if_range_holds(fields, etag.get(), modified.get()));
        let (start, len) = match asked.map_or(Range::Whole, |v| range::parse(v, size)) {
            Range::Whole => (0, size),
            Range::Part { start, len } => {
                served.status = 206;
                let end = start + len - 1;
                served.content_range = Some(Text::of(format_args!("bytes {start}-{end}/{size}")));
                (start, len)
            }
            Range::Unsatisfiable => {
                served.status = 416;
                served.length = Some(0);
                served.content_range = Some(Text::of(format_args!("bytes */{size}")));
                return served;
            }
        };
        served.length = Some(len);
        if !head && len > 0 {
            served.body = Some(Body::new(file.file, start, len));
        }
        served
    }

    /// Each field of the head, in order (`Content-Length` left to the front end, which
    /// frames the body).
    pub fn fields(&self, mut field: impl FnMut(&'static str, &[u8])) {
        if self.status != 304 {
            field("Content-Type", self.content_type.as_bytes());
        }
        if let Some(coding) = self.coding {
            field("Content-Encoding", coding.as_bytes());
        }
        if self.vary {
            field("Vary", b"Accept-Encoding");
        }
        field("Last-Modified", self.modified.get());
        field("ETag", self.etag.get());
        field("Accept-Ranges", b"bytes");
        if let Some(range) = &self.content_range {
            field("Content-Range", range.get());
        }
        if let Some(cache) = self.cache_control {
            field("Cache-Control", cache.as_bytes());
        }
    }
}

/// Does `If-None-Match` (or, without it, `If-Modified-Since`) say the client's copy is
/// current (RFC 9110 §13.1.2, §13.1.3)?
fn unchanged(fields: &impl Fields, etag: &[u8], modified: i64) -> bool {
    if let Some(tags) = fields.first(&IF_NONE_MATCH) {
        return tags.trim_ascii() == b"*"
            || tags
                .split(|&b| b == b',')
                .map(|t| t.trim_ascii())
                .any(|t| t.strip_prefix(b"W/").unwrap_or(t) == etag);
    }
    let since = fields
        .first(&IF_MODIFIED_SINCE)
        .and_then(|v| httpdate::parse_http_date(std::str::from_utf8(v).ok()?).ok());
    since.is_some_and(|since| {
        let secs = since
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        modified <= secs
    })
}

/// `If-Range`: the range applies only when the client's copy is this one (a strong match
/// of the tag, or exactly this modification date).
fn if_range_holds(fields: &impl Fields, etag: &[u8], modified: &[u8]) -> bool {
    match fields.first(&IF_RANGE).map(<[u8]>::trim_ascii) {
        None => true,
        Some(v) if v.starts_with(b"\"") => v == etag,
        Some(v) => v == modified,
    }
}
