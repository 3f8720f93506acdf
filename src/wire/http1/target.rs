//! A request target's absolute form (RFC 9112 §3.2.2: `http://authority/path?query`, what a
//! client sends to a proxy it knows is one): its scheme, authority and the origin-form part
//! that follows. Only `http` and `https` with an authority and no userinfo are read here;
//! anything else is not a target tether's engine takes in that form. One taken must name
//! the host its `Host` field names, byte for byte, in an authority the `http` crate parses
//! (RFC 9112 §3.2.2; pingora-core refuses the same ones as it reads a head).

use super::head::{bad, Refusal};

/// The parts of an absolute-form target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Absolute<'a> {
    /// `http` or `https`, in the client's case.
    pub scheme: &'a [u8],
    pub authority: &'a [u8],
    /// What follows the authority: `/path?query`, `?query`, or nothing.
    pub rest: &'a [u8],
}

impl<'a> Absolute<'a> {
    /// The origin-form the target names: its path and query, `/` when it has no path.
    pub fn origin(&self) -> &'a [u8] {
        match self.rest.first() {
            Some(b'/') => self.rest,
            _ => b"/",
        }
    }
}

/// `target` in origin-form (`/path?query`): the target, or what an absolute-form one names
/// after its authority (as pingora-proxy's path reads it).
pub fn origin(target: &[u8]) -> &[u8] {
    match absolute(target) {
        Some(absolute) => absolute.origin(),
        None => target,
    }
}

/// `target`'s parts when it is an `http` or `https` absolute-form with an authority that
/// names no user; `None` for any other target.
pub fn absolute(target: &[u8]) -> Option<Absolute<'_>> {
    let colon = target.iter().position(|&b| b == b':')?;
    let scheme = &target[..colon];
    if !scheme.eq_ignore_ascii_case(b"http") && !scheme.eq_ignore_ascii_case(b"https") {
        return None;
    }
    let after = target[colon + 1..].strip_prefix(b"//")?;
    let end = after
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(after.len());
    let authority = &after[..end];
    if authority.is_empty() || authority.contains(&b'@') {
        return None;
    }
    Some(Absolute {
        scheme,
        authority,
        rest: &after[end..],
    })
}

/// Checks an absolute-form target against the request's `Host` value.
pub fn check(absolute: &Absolute, host: Option<&[u8]>) -> Result<(), Refusal> {
    if http::uri::Authority::try_from(absolute.authority).is_err() {
        return Err(bad(
            "400 Bad Request: an absolute-form target with a malformed authority\n",
        ));
    }
    if host.is_some_and(|h| h != absolute.authority) {
        return Err(bad(
            "400 Bad Request: Host differs from the request target's authority\n",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_forms_are_split_into_their_parts() {
        let a = absolute(b"http://shop.example:8080/a/b?c=1").unwrap();
        assert_eq!(
            (a.scheme, a.authority, a.rest, a.origin()),
            (
                &b"http"[..],
                &b"shop.example:8080"[..],
                &b"/a/b?c=1"[..],
                &b"/a/b?c=1"[..]
            )
        );
        let a = absolute(b"HTTPS://[::1]").unwrap();
        assert_eq!((a.authority, a.origin()), (&b"[::1]"[..], &b"/"[..]));
        assert_eq!(absolute(b"http://shop?q").unwrap().rest, b"?q");
    }

    #[test]
    fn other_targets_are_not_absolute_forms_the_engine_takes() {
        for target in [
            &b"/a"[..],
            b"*",
            b"shop:443",
            b"ftp://shop/a",
            b"http:/shop/a",
            b"http:///a",
            b"http://user@shop/a",
            b"http://user:pw@shop/a",
        ] {
            assert_eq!(
                absolute(target),
                None,
                "{}",
                String::from_utf8_lossy(target)
            );
        }
    }

    #[test]
    fn the_target_and_host_name_one_authority() {
        let a = absolute(b"http://shop:81/a").unwrap();
        assert_eq!(check(&a, Some(b"shop:81")), Ok(()));
        assert_eq!(check(&a, None), Ok(()));
        for host in [&b"shop"[..], b"SHOP:81", b"other:81"] {
            assert_eq!(check(&a, Some(host)).map_err(|r| r.status), Err(400));
        }
        let odd = absolute(b"http://sh op/a").unwrap();
        assert_eq!(check(&odd, Some(b"sh op")).map_err(|r| r.status), Err(400));
    }
}
