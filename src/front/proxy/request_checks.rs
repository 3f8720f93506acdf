//! Checks of a client's request head before it is routed, on pingora-proxy's path: the
//! framing policy both engines share (`crate::wire::http1::framing`: one `Host`, one
//! `Content-Length` value, a `Transfer-Encoding` that frames the body alone and ends in
//! `chunked`), applied to the head Pingora parsed. Every refusal is answered 400 and the
//! connection closed.

use crate::wire::http1::framing::{self, Body};
use http::header::CONTENT_LENGTH;
use http::Version;
use pingora_http::RequestHeader;

/// Why a request head was refused (the body of the 400 answer).
pub type Refusal = &'static str;

/// Checks `req`, collapsing a repeated `Content-Length` of one value (`5, 5`, or two equal
/// lines) into one line, so the server sees the framing Pingora used. `raw_head` is the
/// head as the client sent it (HTTP/1), for what Pingora removed from `req`: it frames a
/// body by `Transfer-Encoding` and drops a `Content-Length` beside it, but a front end that
/// framed it by the `Content-Length` would see the rest as part of this body, and tether
/// would serve it as the next request (CL.TE request smuggling).
pub fn check(req: &mut RequestHeader, raw_head: Option<&[u8]>) -> Result<(), Refusal> {
    let fields = req
        .headers
        .iter()
        .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes()));
    let body = match req.version {
        Version::HTTP_10 | Version::HTTP_11 => {
            let minor = u8::from(req.version == Version::HTTP_11);
            framing::frame(minor, fields).map_err(|r| r.why)?.body
        }
        // HTTP/2 frames its bodies itself; a `Content-Length` must still be one number.
        _ => framing::length_only(fields).map_err(|r| r.why)?,
    };
    match body {
        Body::Chunked if raw_head.is_some_and(has_content_length) => {
            Err("400 Bad Request: both Content-Length and Transfer-Encoding\n")
        }
        Body::Length(n) if repeated(req) => {
            // Rare (a repeated header): the one allocation of the number's text is fine here.
            let _ = req.insert_header(CONTENT_LENGTH, n.to_string());
            Ok(())
        }
        _ => Ok(()),
    }
}

/// More than one `Content-Length` line, or a list in one.
fn repeated(req: &RequestHeader) -> bool {
    let mut lengths = req.headers.get_all(CONTENT_LENGTH).iter();
    match lengths.next() {
        None => false,
        Some(first) => lengths.next().is_some() || first.as_bytes().contains(&b','),
    }
}

/// Does a raw HTTP/1 head carry a `Content-Length` field?
fn has_content_length(head: &[u8]) -> bool {
    const NAME: &[u8] = b"content-length:";
    head.split(|&b| b == b'\n')
        .skip(1)
        .any(|line| line.len() >= NAME.len() && line[..NAME.len()].eq_ignore_ascii_case(NAME))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(version: Version, headers: &[(&str, &str)]) -> RequestHeader {
        let mut r = RequestHeader::build("POST", b"/", None).unwrap();
        r.set_version(version);
        for (k, v) in headers {
            r.append_header(k.to_string(), *v).unwrap();
        }
        r
    }

    fn lengths(r: &RequestHeader) -> Vec<String> {
        r.headers
            .get_all(CONTENT_LENGTH)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn host_is_required_once_on_http_1_1() {
        assert!(check(&mut req(Version::HTTP_11, &[("Host", "a")]), None).is_ok());
        assert!(check(&mut req(Version::HTTP_11, &[]), None).is_err());
        assert!(check(
            &mut req(Version::HTTP_11, &[("Host", "a"), ("Host", "b")]),
            None
        )
        .is_err());
        // HTTP/1.0 may omit it, but not repeat it.
        assert!(check(&mut req(Version::HTTP_10, &[]), None).is_ok());
        assert!(check(
            &mut req(Version::HTTP_10, &[("Host", "a"), ("Host", "a")]),
            None
        )
        .is_err());
    }

    #[test]
    fn transfer_encoding_frames_alone_and_ends_in_chunked() {
        let te = |version, value: &str, raw: &[u8]| {
            let mut r = req(version, &[("Host", "a"), ("Transfer-Encoding", value)]);
            check(&mut r, Some(raw))
        };
        let plain = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(te(Version::HTTP_11, "chunked", plain), Ok(()));
        assert_eq!(te(Version::HTTP_11, "gzip, chunked", plain), Ok(()));
        assert_eq!(te(Version::HTTP_11, "Chunked", plain), Ok(()));
        assert_eq!(te(Version::HTTP_11, ", , chunked", plain), Ok(()));
        for bad in ["gzip", "chunked, gzip", "chunked, ", "identity", ""] {
            assert!(te(Version::HTTP_11, bad, plain).is_err(), "{bad:?}");
        }
        // Pingora removed the Content-Length; the raw head still has it, in any case.
        for raw in [
            &b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\ncontent-LENGTH:6\r\nHost: a\r\n\r\n",
        ] {
            let e = te(Version::HTTP_11, "chunked", raw).unwrap_err();
            assert!(e.contains("both Content-Length and Transfer-Encoding"), "{e}");
        }
        // A field whose name only starts like it, or a path that holds it, is not one.
        let near = b"POST /content-length:1 HTTP/1.1\r\nX-Content-Length: 6\r\nHost: a\r\n\r\n";
        assert_eq!(te(Version::HTTP_11, "chunked", near), Ok(()));
        let mut both = req(
            Version::HTTP_11,
            &[
                ("Host", "a"),
                ("Transfer-Encoding", "chunked"),
                ("Content-Length", "6"),
            ],
        );
        assert!(check(&mut both, None).is_err());
        assert!(te(Version::HTTP_10, "chunked", plain).is_err());
    }

    #[test]
    fn repeated_content_lengths_become_one() {
        for given in [
            &[("Content-Length", "5, 5")][..],
            &[("Content-Length", "5"), ("Content-Length", "5")],
            &[("Content-Length", "5,5"), ("Content-Length", " 5 ")],
        ] {
            let mut r = req(Version::HTTP_11, given);
            r.append_header("Host", "a").unwrap();
            assert_eq!(check(&mut r, None), Ok(()), "{given:?}");
            assert_eq!(lengths(&r), ["5"], "{given:?}");
        }
        let mut single = req(Version::HTTP_11, &[("Host", "a"), ("Content-Length", "7")]);
        assert_eq!(check(&mut single, None), Ok(()));
        assert_eq!(lengths(&single), ["7"]);
        for bad in [
            &[("Content-Length", "5, 6")][..],
            &[("Content-Length", "5"), ("Content-Length", "6")],
            &[("Content-Length", "5,")],
            &[("Content-Length", "5, -5")],
        ] {
            let mut r = req(Version::HTTP_11, bad);
            r.append_header("Host", "a").unwrap();
            assert!(check(&mut r, None).is_err(), "{bad:?}");
        }
    }
}
