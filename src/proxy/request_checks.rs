//! Checks of a client's request head before it is routed: exactly one `Host` on HTTP/1.1
//! (RFC 9112 §3.2) and one `Content-Length` value (RFC 9110 §8.6), as nginx and HAProxy do.

use http::header::{CONTENT_LENGTH, HOST};
use http::Version;
use pingora_http::RequestHeader;

/// Why a request head was refused (the body of the 400 answer).
pub type Refusal = &'static str;

/// Checks `req`, collapsing a repeated `Content-Length` of one value (`5, 5`, or two equal
/// lines) into one line, so the server sees the framing Pingora used.
pub fn check(req: &mut RequestHeader) -> Result<(), Refusal> {
    if req.version <= Version::HTTP_11 {
        let mut hosts = req.headers.get_all(HOST).iter();
        let first = hosts.next();
        if hosts.next().is_some() {
            return Err("400 Bad Request: more than one Host header\n");
        }
        if first.is_none() && req.version == Version::HTTP_11 {
            return Err("400 Bad Request: HTTP/1.1 requires a Host header\n");
        }
    }
    let mut lengths = req.headers.get_all(CONTENT_LENGTH).iter();
    let repeated = match lengths.next() {
        None => false,
        Some(first) => lengths.next().is_some() || first.as_bytes().contains(&b','),
    };
    if repeated {
        // Rare (a repeated header): the one allocation of the number's text is fine here.
        let length = one_length(req)?;
        let _ = req.insert_header(CONTENT_LENGTH, length.to_string());
    }
    Ok(())
}

/// The single value every `Content-Length` line and list element agrees on.
fn one_length(req: &RequestHeader) -> Result<u64, Refusal> {
    let mut found: Option<u64> = None;
    for line in req.headers.get_all(CONTENT_LENGTH) {
        for part in line.as_bytes().split(|&b| b == b',') {
            let part = part.trim_ascii();
            let n = std::str::from_utf8(part)
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or("400 Bad Request: invalid Content-Length\n")?;
            if found.is_some_and(|f| f != n) {
                return Err("400 Bad Request: conflicting Content-Length values\n");
            }
            found = Some(n);
        }
    }
    found.ok_or("400 Bad Request: invalid Content-Length\n")
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
        assert!(check(&mut req(Version::HTTP_11, &[("Host", "a")])).is_ok());
        assert!(check(&mut req(Version::HTTP_11, &[])).is_err());
        assert!(check(&mut req(Version::HTTP_11, &[("Host", "a"), ("Host", "b")])).is_err());
        // HTTP/1.0 may omit it, but not repeat it.
        assert!(check(&mut req(Version::HTTP_10, &[])).is_ok());
        assert!(check(&mut req(Version::HTTP_10, &[("Host", "a"), ("Host", "a")])).is_err());
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
            assert_eq!(check(&mut r), Ok(()), "{given:?}");
            assert_eq!(lengths(&r), ["5"], "{given:?}");
        }
        let mut single = req(Version::HTTP_11, &[("Host", "a"), ("Content-Length", "7")]);
        assert_eq!(check(&mut single), Ok(()));
        assert_eq!(lengths(&single), ["7"]);
        for bad in [
            &[("Content-Length", "5, 6")][..],
            &[("Content-Length", "5"), ("Content-Length", "6")],
            &[("Content-Length", "5,")],
            &[("Content-Length", "5, -5")],
        ] {
            let mut r = req(Version::HTTP_11, bad);
            r.append_header("Host", "a").unwrap();
            assert!(check(&mut r).is_err(), "{bad:?}");
        }
    }
}
