//! How an HTTP/1 request's body is framed, and the facts of its head that decide how it is
//! relayed, read in one pass over its fields, with a strict policy (RFC 9112 §6, §9.3,
//! RFC 9110 §7.6.1, §8.6; `docs/DESIGN.md` section 10):
//!
//! - `Transfer-Encoding` with `Content-Length`: refused (CL.TE / TE.CL smuggling);
//! - `Transfer-Encoding` on HTTP/1.0: refused (a 1.0 hop cannot have framed it);
//! - `Transfer-Encoding` whose final coding is not `chunked`, or `chunked` applied twice:
//!   refused (the length cannot be known);
//! - `Content-Length` that is not digits, or lines and list elements that differ: refused
//!   (equal repeats are one length);
//! - `Host` missing on HTTP/1.1, or more than one: refused.
//!
//! Everything else about the syntax of the head (bare CR or LF, obs-fold, whitespace
//! before a colon) is refused when it is read (`head.rs`).

use super::head::{bad, Refusal};

/// How the request's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// No body (no `Content-Length`, no `Transfer-Encoding`: RFC 9112 §6.3 rule 7).
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked, up to its last chunk and trailer section.
    Chunked,
}

/// What one pass over a request head's fields found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    pub body: Body,
    /// The index of the `Host` field among the fields.
    pub host: Option<usize>,
    /// The connection may carry another request after this one (HTTP/1.1 without
    /// `Connection: close`, HTTP/1.0 with `Connection: keep-alive`).
    pub keep_alive: bool,
    /// `Connection` names other fields (hop-by-hop, to be removed) or `upgrade`.
    pub connection_options: bool,
    /// An `Upgrade` field (WebSocket and the like).
    pub upgrade: bool,
    /// An `Expect` field.
    pub expect: bool,
}

/// Reads the framing of a request of HTTP/1.`minor` from its fields (name, value).
pub fn frame<'a>(
    minor: u8,
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<Framing, Refusal> {
    let mut f = Framing {
        body: Body::Empty,
        host: None,
        keep_alive: false,
        connection_options: false,
        upgrade: false,
        expect: false,
    };
    let (mut hosts, mut length, mut te): (usize, Option<u64>, Option<&[u8]>) = (0, None, None);
    let (mut chunked_twice, mut close, mut keep_alive) = (false, false, false);
    for (i, (name, value)) in fields.enumerate() {
        if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
            f.host = Some(i);
            // `Host` is `uri-host [ ":" port ]` (RFC 9110 §7.2): no userinfo, which a
            // server or a log might take for the host (pingora-core refuses it too).
            if value.contains(&b'@') {
                return Err(bad("400 Bad Request: userinfo (@) in Host\n"));
            }
        } else if name.eq_ignore_ascii_case(b"content-length") {
            length = Some(content_length(value, length)?);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            // `chunked` anywhere but last, across all the lines, is applied twice or not
            // last: refused either way. Only the final coding is kept.
            if te.is_some_and(ends_in_chunked) {
                chunked_twice = true;
            }
            chunked_twice |= value
                .rsplit(|&b| b == b',')
                .skip(1)
                .any(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            te = Some(value);
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive = true;
                } else if !token.is_empty() {
                    f.connection_options = true;
                }
            }
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            f.upgrade = true;
        } else if name.eq_ignore_ascii_case(b"expect") {
            f.expect = true;
        }
    }
    // A `close` wins over a `keep-alive`, whatever their order.
    f.keep_alive = !close && (minor >= 1 || keep_alive);
    if let Some(te) = te {
        if minor == 0 {
            return Err(bad(
                "400 Bad Request: Transfer-Encoding in an HTTP/1.0 request\n",
            ));
        }
        if length.is_some() {
            return Err(bad(
                "400 Bad Request: both Content-Length and Transfer-Encoding\n",
            ));
        }
        if chunked_twice || !ends_in_chunked(te) {
            return Err(bad(
                "400 Bad Request: a Transfer-Encoding that does not end in chunked\n",
            ));
        }
        f.body = Body::Chunked;
    } else if let Some(n) = length {
        f.body = Body::Length(n);
    }
    if hosts > 1 {
        return Err(bad("400 Bad Request: more than one Host header\n"));
    }
    if hosts == 0 && minor == 1 {
        return Err(bad("400 Bad Request: HTTP/1.1 requires a Host header\n"));
    }
    Ok(f)
}

/// The `Content-Length` of a request whose version frames its body otherwise (HTTP/2):
/// the one value its lines agree on, or [`Body::Empty`] without one.
pub fn length_only<'a>(
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<Body, Refusal> {
    let mut length = None;
    for (name, value) in fields {
        if name.eq_ignore_ascii_case(b"content-length") {
            length = Some(content_length(value, length)?);
        }
    }
    Ok(length.map_or(Body::Empty, Body::Length))
}

/// The last coding of a `Transfer-Encoding` line is `chunked` (`chunked, ` ends in an
/// empty coding: not chunked, as Pingora frames it).
fn ends_in_chunked(value: &[u8]) -> bool {
    value
        .rsplit(|&b| b == b',')
        .next()
        .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// A `Content-Length` line's value, agreeing with the lines before it (`before`).
fn content_length(value: &[u8], before: Option<u64>) -> Result<u64, Refusal> {
    let mut found = before;
    for part in value.split(|&b| b == b',') {
        let n =
            digits(part.trim_ascii()).ok_or(bad("400 Bad Request: invalid Content-Length\n"))?;
        if found.is_some_and(|f| f != n) {
            return Err(bad("400 Bad Request: conflicting Content-Length values\n"));
        }
        found = Some(n);
    }
    found.ok_or(bad("400 Bad Request: invalid Content-Length\n"))
}

/// A decimal number of one or more digits that fits in a `u64`.
fn digits(text: &[u8]) -> Option<u64> {
    if text.is_empty() {
        return None;
    }
    text.iter().try_fold(0u64, |n, &b| {
        let d = b.checked_sub(b'0').filter(|d| *d <= 9)?;
        n.checked_mul(10)?.checked_add(u64::from(d))
    })
}

/// Does the request expect `100-continue` (RFC 9110 §10.1.1), by its first `Expect`
/// value? What a proxy answers itself before it reads the body; both engines ask this.
pub fn expects_continue<'a>(mut values: impl Iterator<Item = &'a [u8]>) -> bool {
    values
        .next()
        .is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"100-continue"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framing(minor: u8, fields: &[(&str, &str)]) -> Result<Framing, &'static str> {
        frame(
            minor,
            fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        )
        .map_err(|r| r.why)
    }

    fn body(minor: u8, fields: &[(&str, &str)]) -> Result<Body, &'static str> {
        framing(minor, fields).map(|f| f.body)
    }

    const H: (&str, &str) = ("Host", "a");

    /// One row per rule of RFC 9112 §6 and RFC 9110 §8.6 the engine applies.
    #[test]
    fn body_framing_table() {
        let refused = |why: &'static str| Err(why);
        let both = "400 Bad Request: both Content-Length and Transfer-Encoding\n";
        let not_chunked = "400 Bad Request: a Transfer-Encoding that does not end in chunked\n";
        let invalid = "400 Bad Request: invalid Content-Length\n";
        let conflicting = "400 Bad Request: conflicting Content-Length values\n";
        let te_10 = "400 Bad Request: Transfer-Encoding in an HTTP/1.0 request\n";
        for (minor, fields, expected) in [
            // §6.3 rule 7: neither field, no body.
            (1, &[H][..], Ok(Body::Empty)),
            (1, &[H, ("Content-Length", "0")], Ok(Body::Length(0))),
            (1, &[H, ("Content-Length", "42")], Ok(Body::Length(42))),
            (1, &[H, ("Content-Length", "007")], Ok(Body::Length(7))),
            // RFC 9110 §8.6: a list of equal values, or equal lines, is one length.
            (1, &[H, ("Content-Length", "5, 5")], Ok(Body::Length(5))),
            (
                1,
                &[H, ("Content-Length", "5"), ("Content-Length", "5")],
                Ok(Body::Length(5)),
            ),
            (
                1,
                &[H, ("Content-Length", "5"), ("Content-Length", "6")],
                refused(conflicting),
            ),
            (1, &[H, ("Content-Length", "5, 6")], refused(conflicting)),
            (1, &[H, ("Content-Length", "5,")], refused(invalid)),
            (1, &[H, ("Content-Length", "")], refused(invalid)),
            (1, &[H, ("Content-Length", "+5")], refused(invalid)),
            (1, &[H, ("Content-Length", "-5")], refused(invalid)),
            (1, &[H, ("Content-Length", "0x10")], refused(invalid)),
            (1, &[H, ("Content-Length", "1 2")], refused(invalid)),
            (
                1,
                &[H, ("Content-Length", "18446744073709551616")],
                refused(invalid),
            ),
            (
                1,
                &[H, ("Content-Length", "18446744073709551615")],
                Ok(Body::Length(u64::MAX)),
            ),
            // §6.1: chunked last, alone with no Content-Length, on 1.1 only.
            (1, &[H, ("Transfer-Encoding", "chunked")], Ok(Body::Chunked)),
            (1, &[H, ("Transfer-Encoding", "Chunked")], Ok(Body::Chunked)),
            (
                1,
                &[H, ("Transfer-Encoding", "gzip, chunked")],
                Ok(Body::Chunked),
            ),
            (
                1,
                &[
                    H,
                    ("Transfer-Encoding", "gzip"),
                    ("Transfer-Encoding", "chunked"),
                ],
                Ok(Body::Chunked),
            ),
            (
                1,
                &[H, ("Transfer-Encoding", "chunked"), ("Content-Length", "5")],
                refused(both),
            ),
            (
                1,
                &[H, ("Content-Length", "5"), ("Transfer-Encoding", "chunked")],
                refused(both),
            ),
            (1, &[H, ("Transfer-Encoding", "gzip")], refused(not_chunked)),
            (
                1,
                &[H, ("Transfer-Encoding", "chunked, gzip")],
                refused(not_chunked),
            ),
            (
                1,
                &[H, ("Transfer-Encoding", "chunked, ")],
                refused(not_chunked),
            ),
            (1, &[H, ("Transfer-Encoding", "")], refused(not_chunked)),
            (
                1,
                &[H, ("Transfer-Encoding", "identity")],
                refused(not_chunked),
            ),
            (
                1,
                &[H, ("Transfer-Encoding", "chunked, chunked")],
                refused(not_chunked),
            ),
            (
                1,
                &[
                    H,
                    ("Transfer-Encoding", "chunked"),
                    ("Transfer-Encoding", "chunked"),
                ],
                refused(not_chunked),
            ),
            (
                1,
                &[
                    H,
                    ("Transfer-Encoding", "chunked"),
                    ("Transfer-Encoding", "gzip"),
                ],
                refused(not_chunked),
            ),
            (0, &[("Transfer-Encoding", "chunked")], refused(te_10)),
            (0, &[("Content-Length", "3")], Ok(Body::Length(3))),
        ] {
            assert_eq!(body(minor, fields), expected, "HTTP/1.{minor} {fields:?}");
        }
    }

    /// RFC 9112 §3.2: one Host on HTTP/1.1; HTTP/1.0 may leave it out but not repeat it.
    #[test]
    fn host_table() {
        assert_eq!(framing(1, &[("Host", "a")]).unwrap().host, Some(0));
        assert_eq!(
            framing(1, &[("X", "1"), ("host", "a")]).unwrap().host,
            Some(1)
        );
        assert!(framing(1, &[]).is_err());
        assert!(framing(1, &[H, ("Host", "a")]).is_err());
        assert_eq!(framing(0, &[]).unwrap().host, None);
        assert!(framing(0, &[H, H]).is_err());
        // Found by tests/http1_differential.rs: pingora-core refused it, the engine did not.
        assert!(framing(1, &[("Host", "@shop")]).is_err());
        assert!(framing(1, &[("Host", "user:pw@shop")]).is_err());
    }

    /// RFC 9112 §9.3: persistence by version and `Connection`.
    #[test]
    fn keep_alive_table() {
        for (minor, connection, keep_alive, options) in [
            (1, None, true, false),
            (1, Some("close"), false, false),
            (1, Some("Keep-Alive"), true, false),
            (1, Some("keep-alive, close"), false, false),
            (1, Some("close, keep-alive"), false, false),
            (1, Some("upgrade"), true, true),
            (1, Some("X-Secret"), true, true),
            (1, Some(" , "), true, false),
            (0, None, false, false),
            (0, Some("keep-alive"), true, false),
            (0, Some("close, keep-alive"), false, false),
            (0, Some("keep-alive, close"), false, false),
        ] {
            let mut fields = vec![H];
            fields.extend(connection.map(|c| ("Connection", c)));
            let f = framing(minor, &fields).unwrap();
            assert_eq!(
                (f.keep_alive, f.connection_options),
                (keep_alive, options),
                "HTTP/1.{minor} Connection: {connection:?}"
            );
        }
    }

    #[test]
    fn upgrade_and_expect_are_noticed() {
        let f = framing(1, &[H, ("Upgrade", "websocket"), ("Connection", "Upgrade")]).unwrap();
        assert!(f.upgrade && f.connection_options && !f.expect);
        let f = framing(1, &[H, ("Expect", "100-continue")]).unwrap();
        assert!(f.expect && !f.upgrade);
    }

    #[test]
    fn only_a_first_expectation_of_100_continue_is_one() {
        let expects =
            |values: &[&'static str]| expects_continue(values.iter().map(|v| v.as_bytes()));
        assert!(expects(&["100-continue"]));
        assert!(expects(&["100-Continue ", "other"]));
        assert!(!expects(&["other", "100-continue"]));
        assert!(!expects(&[]));
    }
}
