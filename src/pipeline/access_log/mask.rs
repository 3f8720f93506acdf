//! Session ids in logged paths are credentials: this masks them before a line is written.

use std::borrow::Cow;

/// What replaces a session id (the route or clone list after it is kept: it names a server,
/// not a user, and is what an operator needs to read a log).
const MASK: &str = "***";

/// Masks the value of every `;name=` path parameter and `name=` query parameter of `uri`
/// whose name is one of `names` (ASCII case-insensitive), up to the first `.`, `:` or `+`
/// of the value (Tomcat's `.jvmRoute`, WebSphere's `:clone` list are kept).
pub fn session_ids<'a>(uri: &'a str, names: &[&[u8]]) -> Cow<'a, str> {
    let bytes = uri.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        // A parameter starts after `;` (path parameter), or `?`, `&`, `;` in the query.
        if matches!(b, b';' | b'?' | b'&') {
            let start = i + 1;
            if let Some(value_start) = names.iter().find_map(|n| named(bytes, start, n)) {
                let value_end = bytes[value_start..]
                    .iter()
                    .position(|c| matches!(c, b'?' | b';' | b'/' | b'#' | b'&'))
                    .map_or(bytes.len(), |p| value_start + p);
                let id_end = bytes[value_start..value_end]
                    .iter()
                    .position(|c| matches!(c, b'.' | b':' | b'+'))
                    .map_or(value_end, |p| value_start + p);
                if id_end > value_start {
                    let o = out.get_or_insert_with(|| String::with_capacity(uri.len()));
                    o.push_str(&uri[copied..value_start]);
                    o.push_str(MASK);
                    copied = id_end;
                }
                i = value_end;
                continue;
            }
        }
        i += 1;
    }
    match out {
        None => Cow::Borrowed(uri),
        Some(mut o) => {
            o.push_str(&uri[copied..]);
            Cow::Owned(o)
        }
    }
}

/// Where the value starts when `bytes[start..]` begins with `name=`.
fn named(bytes: &[u8], start: usize, name: &[u8]) -> Option<usize> {
    let end = start + name.len();
    let candidate = bytes.get(start..end)?;
    (candidate.eq_ignore_ascii_case(name) && bytes.get(end) == Some(&b'=')).then_some(end + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: &[&[u8]] = &[b"jsessionid"];

    #[test]
    fn session_ids_are_masked_and_routes_kept() {
        for (given, want) in [
            ("/shop/cart", "/shop/cart"),
            ("/shop;jsessionid=ABC123.tc1", "/shop;jsessionid=***.tc1"),
            ("/shop;JSESSIONID=ABC123", "/shop;JSESSIONID=***"),
            (
                "/a;jsessionid=0000ABC:c1:c2/b?x=1",
                "/a;jsessionid=***:c1:c2/b?x=1",
            ),
            (
                "/a?user=7&jsessionid=SECRET.n2&b=2",
                "/a?user=7&jsessionid=***.n2&b=2",
            ),
            ("/a?jsessionid=SECRET", "/a?jsessionid=***"),
            (
                "/a;jsessionid=X1.r/b;jsessionid=X2#frag",
                "/a;jsessionid=***.r/b;jsessionid=***#frag",
            ),
            // Names that only end or start like it, and empty values, are left alone.
            ("/a;xjsessionid=S", "/a;xjsessionid=S"),
            ("/a;jsessionidx=S", "/a;jsessionidx=S"),
            ("/a;jsessionid=", "/a;jsessionid="),
            ("/a;jsessionid", "/a;jsessionid"),
        ] {
            assert_eq!(session_ids(given, NAMES), want, "{given}");
        }
        assert!(matches!(session_ids("/plain", NAMES), Cow::Borrowed(_)));
    }

    #[test]
    fn every_configured_name_is_masked() {
        let names: &[&[u8]] = &[b"jsessionid", b"sid"];
        assert_eq!(
            session_ids("/a;sid=S1?jsessionid=S2", names),
            "/a;sid=***?jsessionid=***"
        );
    }
}
