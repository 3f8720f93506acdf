//! The request path as routes match it, the way Apache with mod_jk saw it before it
//! matched a mount: `%xx` decoded (but `%2F`, which stays an encoded slash and matches no
//! `/`), each segment's `;parameters` removed (`;jsessionid=...`), `//` merged, and `.`
//! and `..` segments resolved (never above the root). So `/app/./admin/x`,
//! `/%61pp/admin/x` and `/app//admin/x` are all `/app/admin/x` to a route or an exclusion.
//! The path forwarded to the server is the request's own; only the match uses this form.

/// The path to match: borrowed when it needs no change (or only loses a `;parameter` at
/// its end, the common `;jsessionid=` case); a copy otherwise.
pub fn matched(path: &[u8]) -> Result<&[u8], Vec<u8>> {
    let mut semi = None;
    let mut prev = 0u8;
    for (i, &b) in path.iter().enumerate() {
        match b {
            b'%' => return Err(normalize(path)),
            b';' if semi.is_none() => semi = Some(i),
            b'/' | b'.' if prev == b'/' => return Err(normalize(path)),
            b'/' if semi.is_some() => return Err(normalize(path)),
            _ => {}
        }
        prev = b;
    }
    match semi {
        Some(at) => Ok(&path[..at]),
        None => Ok(path),
    }
}

/// The slow way, for a path with something to decode, merge or resolve.
fn normalize(path: &[u8]) -> Vec<u8> {
    let decoded = decode(path);
    let mut segments: Vec<&[u8]> = Vec::new();
    let mut trailing = false;
    for raw in decoded.split(|&b| b == b'/').skip(1) {
        let seg = match raw.iter().position(|&b| b == b';') {
            Some(at) => &raw[..at],
            None => raw,
        };
        trailing = true;
        match seg {
            b"" | b"." => {}
            b".." => {
                segments.pop();
            }
            _ => {
                segments.push(seg);
                trailing = false;
            }
        }
    }
    let mut out = Vec::with_capacity(decoded.len());
    for seg in &segments {
        out.push(b'/');
        out.extend_from_slice(seg);
    }
    if trailing || out.is_empty() {
        out.push(b'/');
    }
    out
}

/// `%xx` decoded, except an encoded `/`; a `%` without two hex digits is kept as it is.
fn decode(path: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        let byte = match (path[i], path.get(i + 1), path.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) => match (hex(h), hex(l)) {
                (Some(h), Some(l)) if h * 16 + l != b'/' => Some(h * 16 + l),
                _ => None,
            },
            _ => None,
        };
        match byte {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(path[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::matched;

    #[test]
    fn paths_as_mod_jk_matched_them() {
        for (path, want, borrowed) in [
            ("/app/x", "/app/x", true),
            ("/", "/", true),
            ("/x.jsp;jsessionid=ABC.n1", "/x.jsp", true),
            ("/app;jsessionid=1/x", "/app/x", false),
            ("/exact;a=b;c=d", "/exact", true),
            ("/app/x;foo=bar/y.jsp", "/app/x/y.jsp", false),
            ("/%61pp/x", "/app/x", false),
            ("/x/../app/y", "/app/y", false),
            ("/app/./x", "/app/x", false),
            ("//app/x", "/app/x", false),
            ("/app//x", "/app/x", false),
            ("/../../etc", "/etc", false),
            ("/app/", "/app/", true),
            ("/app/.", "/app/", false),
            ("/app/x/..", "/app/", false),
            ("/a%2Fb/c", "/a%2Fb/c", false),
            ("/a%2fb", "/a%2fb", false),
            ("/100%", "/100%", false),
            ("/%zz/x", "/%zz/x", false),
            ("/a%3Bb=1/c", "/a/c", false),
            ("/.hidden/x", "/.hidden/x", false),
            ("/x.y/z", "/x.y/z", true),
        ] {
            let got = matched(path.as_bytes());
            assert_eq!(got.is_ok(), borrowed, "{path}");
            let got = got.map_or_else(String::from_utf8, |b| String::from_utf8(b.to_vec()));
            assert_eq!(got.unwrap(), want, "{path}");
        }
    }
}
