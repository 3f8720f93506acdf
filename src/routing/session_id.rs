//! Finding session ids in a request head: `;jsessionid=` path parameter, then cookies.
//!
//! Works on bytes (cookie headers may hold anything) and never allocates: every value is a
//! slice of the request head.

/// Session ids longer than this are ignored (Tomcat's are ~40 bytes; WebSphere's ~30).
pub const MAX_SESSION_ID_LEN: usize = 4096;

/// The value of the first `;{name}=` parameter in the path part of `uri` (before `?`).
/// The value ends at `?`, `;`, `/`, `#` or the end. Empty values count as absent.
pub fn path_parameter<'a>(uri: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let path_end = memchr(b'?', uri).unwrap_or(uri.len());
    let path = &uri[..path_end];
    let mut from = 0;
    while let Some(off) = memchr(b';', &path[from..]) {
        let start = from + off + 1;
        let rest = &path[start..];
        if rest.len() > name.len() && rest.starts_with(name) && rest[name.len()] == b'=' {
            let value = &rest[name.len() + 1..];
            let end = value
                .iter()
                .position(|b| matches!(b, b'?' | b';' | b'/' | b'#'))
                .unwrap_or(value.len());
            let value = &value[..end];
            return (!value.is_empty()).then_some(value);
        }
        from = start;
    }
    None
}

/// Every value of cookie `name` in one `Cookie` header value, in order, quotes removed.
/// Pairs are separated by `;` and also by `,` (mod_jk does the same): a proxy or client in
/// front may have merged two `Cookie` headers into one with `, `, and no cookie value may
/// hold a `,` (RFC 6265 `cookie-octet`).
pub fn cookie_values<'a>(header: &'a [u8], name: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    header
        .split(|&b| b == b';' || b == b',')
        .filter_map(move |pair| {
            let pair = trim(pair);
            let eq = memchr(b'=', pair)?;
            if trim(&pair[..eq]) != name {
                return None;
            }
            let value = unquote(trim(&pair[eq + 1..]));
            (!value.is_empty()).then_some(value)
        })
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

fn unquote(s: &[u8]) -> &[u8] {
    if s.len() >= 2 && s[0] == b'"' && s[s.len() - 1] == b'"' {
        &s[1..s.len() - 1]
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_parameter_cases() {
        let cases: &[(&str, Option<&str>)] = &[
            ("/app;jsessionid=ABC.n1", Some("ABC.n1")),
            ("/app;jsessionid=ABC.n1?x=1", Some("ABC.n1")),
            ("/app;jsessionid=ABC.n1;other=2", Some("ABC.n1")),
            ("/app;jsessionid=ABC.n1/more", Some("ABC.n1")),
            ("/app;jsessionid=ABC.n1#frag", Some("ABC.n1")),
            ("/a;x=1;jsessionid=S.n2/b", Some("S.n2")),
            (
                "/a;jsessionid=FIRST.n1/b;jsessionid=SECOND.n2",
                Some("FIRST.n1"),
            ),
            ("/app;jsessionid=", None),
            ("/app;jsessionid=;x", None),
            ("/app;JSESSIONID=ABC.n1", None),
            ("/app;xjsessionid=ABC.n1", None),
            ("/app;jsessionidx=ABC.n1", None),
            ("/app?;jsessionid=ABC.n1", None),
            ("/app;jsessionid", None),
            ("/app", None),
            ("", None),
        ];
        for (uri, want) in cases {
            let got = path_parameter(uri.as_bytes(), b"jsessionid");
            assert_eq!(got, want.map(str::as_bytes), "{uri}");
        }
    }

    #[test]
    fn cookie_cases() {
        let cases: &[(&[u8], &[&[u8]])] = &[
            (b"JSESSIONID=A.n1", &[b"A.n1"]),
            (b"a=1; JSESSIONID=A.n1; b=2", &[b"A.n1"]),
            (b"JSESSIONID=A.n1; JSESSIONID=B.n2", &[b"A.n1", b"B.n2"]),
            (b"JSESSIONID=\"Q.n3\"", &[b"Q.n3"]),
            (b"JSESSIONID=\"\"", &[]),
            (b"JSESSIONID=\"", &[b"\""]),
            (b"XJSESSIONID=A.n1; JSESSIONIDX=B.n2; jsessionid=C.n3", &[]),
            (b"  JSESSIONID  =  A.n1  ;", &[b"A.n1"]),
            (b"JSESSIONID=", &[]),
            (b"JSESSIONID", &[]),
            (b";;;=;==;", &[]),
            (b"JSESSIONID=a=b.n1", &[b"a=b.n1"]),
            (b"JSESSIONID=\xff\xfe.n1", &[b"\xff\xfe.n1"]),
            // Two `Cookie` headers merged into one with `, ` (mod_jk ends a value at `,`).
            (b"JSESSIONID=abc.n1, other=1", &[b"abc.n1"]),
            (b"other=1, JSESSIONID=abc.n1", &[b"abc.n1"]),
            (
                b"a=1; JSESSIONID=A.n1, b=2; JSESSIONID=B.n2",
                &[b"A.n1", b"B.n2"],
            ),
            (b"JSESSIONID=A.n1,JSESSIONID=B.n2", &[b"A.n1", b"B.n2"]),
            (b"JSESSIONID=\"Q.n3\", x=1", &[b"Q.n3"]),
            (b"JSESSIONID=,", &[]),
            (b",,,JSESSIONID=A.n1,,,", &[b"A.n1"]),
            (b"", &[]),
        ];
        for (header, want) in cases {
            let got: Vec<&[u8]> = cookie_values(header, b"JSESSIONID").collect();
            assert_eq!(got, *want, "{}", String::from_utf8_lossy(header));
        }
    }
}
