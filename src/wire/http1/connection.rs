//! The fields a request's `Connection` nominates (RFC 9110 §7.6.1: hop-by-hop, so a proxy
//! removes them), checked as pingora-proxy's default request policy checks them, so that
//! both engines refuse and remove alike: at most [`MOST`] tokens in all, each a `token`
//! (a quoted or decorated name could slip past the names below), none of them a
//! pseudo-header, `Host` or an `X-Forwarded-*` field (a client must not make a proxy drop
//! what tells the server who the client is).

use super::head::{bad, Refusal};

/// Most tokens in a request's `Connection` lines (`close` and `keep-alive` count too).
pub const MOST: usize = 9;

/// The tokens of `Connection` values, trimmed, empty list elements left out.
fn tokens<'a>(values: impl Iterator<Item = &'a [u8]>) -> impl Iterator<Item = &'a [u8]> {
    values
        .flat_map(|v| v.split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

/// RFC 9110 §5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Checks the nominations of a request's `Connection` values.
pub fn check<'a>(values: impl Iterator<Item = &'a [u8]>) -> Result<(), Refusal> {
    for (i, token) in tokens(values).enumerate() {
        if i >= MOST {
            return Err(bad(
                "400 Bad Request: too many Connection header nominations\n",
            ));
        }
        if !token.iter().all(|&b| is_tchar(b)) {
            return Err(bad(
                "400 Bad Request: invalid token nominated by the Connection header\n",
            ));
        }
        let protected = [
            &b"host"[..],
            b"x-forwarded-for",
            b"x-forwarded-host",
            b"x-forwarded-proto",
        ];
        if protected.iter().any(|p| token.eq_ignore_ascii_case(p)) {
            return Err(bad(
                "400 Bad Request: protected header cannot be nominated by the Connection header\n",
            ));
        }
    }
    Ok(())
}

/// Do the `Connection` values nominate the field `name`?
pub fn nominates<'a>(values: impl Iterator<Item = &'a [u8]>, name: &[u8]) -> bool {
    tokens(values).any(|t| t.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(values: &[&'static str]) -> Result<(), u16> {
        check(values.iter().map(|v| v.as_bytes())).map_err(|r| r.status)
    }

    #[test]
    fn options_are_tokens_and_name_no_protected_field() {
        assert_eq!(checked(&["keep-alive, X-Opt", "Other"]), Ok(()));
        assert_eq!(checked(&["close"]), Ok(()));
        assert_eq!(checked(&["\"X-Opt\""]), Err(400));
        assert_eq!(checked(&[":authority"]), Err(400));
        assert_eq!(checked(&["X-Opt/1"]), Err(400));
        for protected in [
            "Host",
            "x-forwarded-FOR",
            "X-Forwarded-Host",
            "x-forwarded-proto",
        ] {
            assert_eq!(checked(&["keep-alive", protected]), Err(400), "{protected}");
        }
    }

    #[test]
    fn nine_tokens_pass_and_ten_are_refused() {
        assert_eq!(checked(&["a,b,c,d,e", "f, g, h, i"]), Ok(()));
        assert_eq!(checked(&["a,b,c,d,e", "f, g, h, i, j"]), Err(400));
        // Empty list elements are not tokens.
        assert_eq!(checked(&["a,,b, ,c,d,e,f,g,h,i,"]), Ok(()));
    }

    #[test]
    fn a_nominated_field_is_found_by_any_case() {
        let values = [&b"keep-alive, X-Opt"[..], b"other"];
        assert!(nominates(values.iter().copied(), b"x-opt"));
        assert!(nominates(values.iter().copied(), b"OTHER"));
        assert!(!nominates(values.iter().copied(), b"x-op"));
    }
}
