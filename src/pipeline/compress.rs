//! Compressing the servers' answers (`compress:`), decided once for every front end: which
//! coding a client takes ([`Asked`], from its `Accept-Encoding`), whether an answer is
//! compressed ([`plan`]: its type, size, status, `Cache-Control: no-transform`, a coding or
//! range it has already), what that does to its head ([`kept`], [`added`]), and the
//! encoder, which is Pingora's (gzip by flate2, brotli, zstd). Each front end frames the
//! encoder's output for its client.

use crate::config::Compress;
use crate::routing::Fields;
use crate::wire::coding::{self, Coding};
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE};
use pingora_core::protocols::http::compression::{Algorithm, Encode};
use std::sync::Arc;

/// A request's side of compression: the settings for it, and the coding its client takes
/// most gladly (`None`: it takes none that is on).
#[derive(Debug, Clone)]
pub struct Asked {
    settings: Arc<Compress>,
    coding: Option<Coding>,
}

impl Asked {
    pub fn of(settings: &Arc<Compress>, accept: Option<&[u8]>) -> Asked {
        let mut offered = [Coding::Br; 3];
        let mut n = 0;
        for (coding, level) in [
            (Coding::Br, settings.br),
            (Coding::Zstd, settings.zstd),
            (Coding::Gzip, settings.gzip),
        ] {
            if level > 0 {
                offered[n] = coding;
                n += 1;
            }
        }
        Asked {
            settings: settings.clone(),
            coding: coding::preferred(accept, &offered[..n]),
        }
    }
}

/// What compression does to an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// A compressible answer sent as it is (the client takes no coding): it says it varies
    /// with `Accept-Encoding`, so that a cache does not give it to a client that takes one.
    Vary,
    /// Compressed with this coding at this level.
    Squeeze(Coding, u32),
}

/// What compression does to an answer with `status` and fields `answer`, to a request
/// asking `asked`; `None`: nothing (not compressible, or no body: `head`, 1xx, 204, 206,
/// 304).
pub fn plan(asked: &Asked, head: bool, status: u16, answer: &impl Fields) -> Option<Plan> {
    let s = &*asked.settings;
    if head || status < 200 || matches!(status, 204 | 206 | 304) {
        return None;
    }
    let coded = answer
        .first(&CONTENT_ENCODING)
        .is_some_and(|c| !c.trim_ascii().eq_ignore_ascii_case(b"identity"));
    let no_transform = answer.values(&CACHE_CONTROL).any(|v| {
        v.split(|&b| b == b',')
            .any(|d| d.trim_ascii().eq_ignore_ascii_case(b"no-transform"))
    });
    if coded || no_transform || answer.first(&CONTENT_RANGE).is_some() {
        return None;
    }
    let small = answer
        .first(&CONTENT_LENGTH)
        .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok())
        .is_some_and(|n| n < s.min_size);
    let kind = answer.first(&CONTENT_TYPE).unwrap_or_default();
    if small || !listed(&s.types, kind) {
        return None;
    }
    Some(match asked.coding {
        None => Plan::Vary,
        Some(c) => {
            let level = match c {
                Coding::Br => s.br,
                Coding::Zstd => s.zstd,
                Coding::Gzip => s.gzip,
            };
            Plan::Squeeze(c, level)
        }
    })
}

/// Is media type `kind` (a `Content-Type` value) one of `types`?
fn listed(types: &[String], kind: &[u8]) -> bool {
    let kind = kind
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    let Some(slash) = kind.iter().position(|&b| b == b'/') else {
        return false;
    };
    types.iter().any(|t| {
        let t = t.as_bytes();
        t.eq_ignore_ascii_case(kind)
            || (t.ends_with(b"/*") && t[..t.len() - 1].eq_ignore_ascii_case(&kind[..=slash]))
    })
}

/// What becomes of one of the answer's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    As,
    /// Left out: the compressed body's length is not known ahead (`Content-Length`), the
    /// front end frames it (`Transfer-Encoding`), and byte ranges of the original no longer
    /// apply (`Accept-Ranges`).
    Dropped,
    /// A strong `ETag` made weak: the bytes differ, the content is the same.
    Weak,
}

/// The fields a compressed answer leaves out.
const DROPPED: [http::HeaderName; 3] = [
    http::header::CONTENT_LENGTH,
    http::header::TRANSFER_ENCODING,
    http::header::ACCEPT_RANGES,
];

/// What becomes of field `name` (`value`) under `plan`.
pub fn kept(plan: Plan, name: &[u8], value: &[u8]) -> Kept {
    if plan == Plan::Vary {
        return Kept::As;
    }
    if DROPPED
        .iter()
        .any(|d| name.eq_ignore_ascii_case(d.as_str().as_bytes()))
    {
        Kept::Dropped
    } else if name.eq_ignore_ascii_case(b"etag") && value.starts_with(b"\"") {
        Kept::Weak
    } else {
        Kept::As
    }
}

/// The fields `plan` adds (after the answer's own).
pub fn added(plan: Plan) -> impl Iterator<Item = (&'static str, &'static [u8])> {
    let coding = match plan {
        Plan::Squeeze(c, _) => Some(("Content-Encoding", c.name().as_bytes())),
        Plan::Vary => None,
    };
    std::iter::once(("Vary", &b"Accept-Encoding"[..])).chain(coding)
}

/// A head kept as a map of fields (HTTP/2's, Pingora's `ResponseHeader`), as [`edit`]
/// changes it.
pub trait Head {
    fn field(&self, name: &http::HeaderName) -> Option<&[u8]>;
    fn remove(&mut self, name: &http::HeaderName);
    /// Sets `name` to `value` (a value the map cannot take leaves the field as it was).
    fn set(&mut self, name: http::HeaderName, value: &[u8]);
    fn append(&mut self, name: &'static str, value: &'static [u8]);
}

impl Head for http::HeaderMap {
    fn field(&self, name: &http::HeaderName) -> Option<&[u8]> {
        self.get(name).map(http::HeaderValue::as_bytes)
    }

    fn remove(&mut self, name: &http::HeaderName) {
        http::HeaderMap::remove(self, name);
    }

    fn set(&mut self, name: http::HeaderName, value: &[u8]) {
        if let Ok(value) = http::HeaderValue::from_bytes(value) {
            self.insert(name, value);
        }
    }

    fn append(&mut self, name: &'static str, value: &'static [u8]) {
        http::HeaderMap::append(
            self,
            name,
            http::HeaderValue::from_static(std::str::from_utf8(value).unwrap_or_default()),
        );
    }
}

/// `plan`'s edits of a head kept as a map: [`kept`] of each field, then [`added`].
pub fn edit(head: &mut impl Head, plan: Plan) {
    if let Plan::Squeeze(..) = plan {
        for name in &DROPPED {
            head.remove(name);
        }
        let etag = http::header::ETAG;
        if let Some(tag) = head.field(&etag) {
            if kept(plan, b"etag", tag) == Kept::Weak {
                let weak = [b"W/", tag].concat();
                head.set(etag, &weak);
            }
        }
    }
    for (name, value) in added(plan) {
        head.append(name, value);
    }
}

/// A compressed body being made: Pingora's gzip and zstd coders; brotli's own writer, as
/// Pingora's brotli coder ends a body with a flush, not the stream's last block, which
/// decoders refuse as truncated.
pub enum Encoder {
    Pingora(Box<dyn Encode + Send + Sync>),
    /// Taken at the body's end, when the writer closes the stream.
    Brotli(Option<Box<brotli::CompressorWriter<Vec<u8>>>>),
}

/// brotli's window (2^22 bytes, its default) and its writer's buffer.
const BROTLI_WINDOW: u32 = 22;
const BROTLI_BUFFER: usize = 4096;

impl Encoder {
    /// `None` unless `plan` compresses.
    pub fn of(plan: Plan) -> Option<Encoder> {
        match plan {
            Plan::Vary => None,
            Plan::Squeeze(Coding::Br, level) => Some(Encoder::Brotli(Some(Box::new(
                brotli::CompressorWriter::new(Vec::new(), BROTLI_BUFFER, level, BROTLI_WINDOW),
            )))),
            Plan::Squeeze(Coding::Zstd, level) => {
                Algorithm::Zstd.compressor(level).map(Encoder::Pingora)
            }
            Plan::Squeeze(Coding::Gzip, level) => {
                Algorithm::Gzip.compressor(level).map(Encoder::Pingora)
            }
        }
    }

    /// The compressed bytes ready after `data` (often none: the coder gathers input);
    /// `end`: the body's last data, after which everything is out.
    pub fn push(&mut self, data: &[u8], end: bool) -> std::io::Result<Bytes> {
        use std::io::Write;
        match self {
            Encoder::Pingora(e) => e.encode(data, end).map_err(std::io::Error::other),
            Encoder::Brotli(writer) => {
                let Some(w) = writer.as_mut() else {
                    return Ok(Bytes::new());
                };
                w.write_all(data)?;
                if end {
                    let w = writer.take().expect("checked above");
                    return Ok(w.into_inner().into());
                }
                Ok(std::mem::take(w.get_mut()).into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    fn asked(accept: &str) -> Asked {
        let settings = Compress {
            types: vec![
                "text/html".into(),
                "application/json".into(),
                "text/*".into(),
            ],
            min_size: 100,
            gzip: 6,
            br: 4,
            zstd: 0,
        };
        Asked::of(&Arc::new(settings), Some(accept.as_bytes()))
    }

    fn answer(fields: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (n, v) in fields {
            map.append(*n, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn what_is_compressed() {
        let html = answer(&[("content-type", "text/html; charset=utf-8")]);
        let gz = asked("gzip");
        assert_eq!(
            plan(&gz, false, 200, &html),
            Some(Plan::Squeeze(Coding::Gzip, 6))
        );
        assert_eq!(
            plan(&asked("gzip, br, zstd"), false, 200, &html),
            Some(Plan::Squeeze(Coding::Br, 4))
        );
        assert_eq!(
            plan(&asked("zstd"), false, 200, &html),
            Some(Plan::Vary),
            "zstd is off"
        );
        assert_eq!(
            plan(&asked("identity"), false, 200, &html),
            Some(Plan::Vary)
        );
        assert_eq!(
            plan(&gz, false, 404, &html),
            Some(Plan::Squeeze(Coding::Gzip, 6))
        );
        let css = answer(&[("content-type", "TEXT/CSS")]);
        assert!(
            plan(&gz, false, 200, &css).is_some(),
            "text/* takes text/css"
        );
        for (fields, status, head, why) in [
            (
                vec![("content-type", "image/png")],
                200,
                false,
                "not a listed type",
            ),
            (vec![], 200, false, "no type"),
            (
                vec![("content-type", "text/html"), ("content-encoding", "gzip")],
                200,
                false,
                "coded already",
            ),
            (
                vec![
                    ("content-type", "text/html"),
                    ("cache-control", "public, no-transform"),
                ],
                200,
                false,
                "no-transform",
            ),
            (
                vec![("content-type", "text/html"), ("content-length", "99")],
                200,
                false,
                "below min_size",
            ),
            (vec![("content-type", "text/html")], 304, false, "no body"),
            (vec![("content-type", "text/html")], 206, false, "a range"),
            (vec![("content-type", "text/html")], 200, true, "HEAD"),
        ] {
            assert_eq!(plan(&gz, head, status, &answer(&fields)), None, "{why}");
        }
        let big = answer(&[
            ("content-type", "application/json"),
            ("content-length", "100"),
        ]);
        assert!(plan(&gz, false, 200, &big).is_some());
    }

    #[test]
    fn the_head_of_a_compressed_answer() {
        let p = Plan::Squeeze(Coding::Br, 4);
        assert_eq!(kept(p, b"Content-Length", b"10"), Kept::Dropped);
        assert_eq!(kept(p, b"accept-ranges", b"bytes"), Kept::Dropped);
        assert_eq!(kept(p, b"ETag", b"\"abc\""), Kept::Weak);
        assert_eq!(kept(p, b"ETag", b"W/\"abc\""), Kept::As);
        assert_eq!(kept(p, b"Set-Cookie", b"a=b"), Kept::As);
        assert_eq!(kept(Plan::Vary, b"Content-Length", b"10"), Kept::As);
        let fields: Vec<_> = added(p).collect();
        assert_eq!(
            fields,
            [
                ("Vary", &b"Accept-Encoding"[..]),
                ("Content-Encoding", &b"br"[..])
            ]
        );
        assert_eq!(added(Plan::Vary).count(), 1);
    }

    #[test]
    fn each_coding_round_trips() {
        use std::io::Read;
        let text = "<p>tether compresses this</p>\n".repeat(500);
        for coding in [Coding::Gzip, Coding::Br, Coding::Zstd] {
            let mut e = Encoder::of(Plan::Squeeze(coding, 3)).unwrap();
            let mut out = Vec::new();
            for part in text.as_bytes().chunks(1000) {
                out.extend_from_slice(&e.push(part, false).unwrap());
            }
            out.extend_from_slice(&e.push(&[], true).unwrap());
            assert!(out.len() < text.len() / 10, "{coding:?}: {}", out.len());
            let mut back = Vec::new();
            match coding {
                Coding::Gzip => flate2::read::GzDecoder::new(&out[..]).read_to_end(&mut back),
                Coding::Br => brotli::Decompressor::new(&out[..], 4096).read_to_end(&mut back),
                Coding::Zstd => zstd::stream::read::Decoder::new(&out[..])
                    .unwrap()
                    .read_to_end(&mut back),
            }
            .unwrap_or_else(|e| panic!("{coding:?}: {e}"));
            assert_eq!(back, text.as_bytes(), "{coding:?}");
        }
    }
}
