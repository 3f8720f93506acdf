//! A request's path made into a name under a `serve:` root, or refused: decoded once, its
//! `;parameters` dropped, `//` and `.` merged away; `..`, encoded separators, backslashes,
//! NUL and bytes that are not UTF-8 (overlong forms included) refused outright rather than
//! resolved, so no spelling of a path names a place outside the root.

use crate::config::Files;

/// Why a path names no file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A path no browser sends: 400.
    Malformed,
    /// A name tether does not serve (a dot file, outside `strip_prefix`): 404.
    Hidden,
}

/// The name under the root (no leading `/`; `.` for the root itself), and whether the path
/// ended in `/` (a directory's index is served only then).
#[derive(Debug, PartialEq, Eq)]
pub struct Name {
    pub relative: Vec<u8>,
    pub slash: bool,
}

/// `path` (origin-form, without its query) as a name under `files.root`.
pub fn name(files: &Files, path: &[u8]) -> Result<Name, Refused> {
    let Some(rest) = path.strip_prefix(b"/") else {
        return Err(Refused::Malformed);
    };
    let mut decoded = Vec::with_capacity(path.len());
    for segment in rest.split(|&b| b == b'/') {
        // `;jsessionid=…` on a static URL is the application's URL rewriting, not a name.
        let segment = match segment.iter().position(|&b| b == b';') {
            Some(at) => &segment[..at],
            None => segment,
        };
        decoded.push(b'/');
        decode(segment, &mut decoded)?;
    }
    if std::str::from_utf8(&decoded).is_err() {
        return Err(Refused::Malformed);
    }
    let slash = decoded.ends_with(b"/");
    let mut relative = Vec::with_capacity(decoded.len());
    let mut kept = &decoded[..];
    if let Some(prefix) = &files.strip_prefix {
        let under = decoded
            .strip_prefix(prefix.as_bytes())
            .filter(|r| r.is_empty() || r.starts_with(b"/"));
        kept = under.ok_or(Refused::Hidden)?;
    }
    for segment in kept.split(|&b| b == b'/') {
        match segment {
            b"" | b"." => continue,
            b".." => return Err(Refused::Malformed),
            [b'.', ..] if !files.dot_files => return Err(Refused::Hidden),
            _ => {}
        }
        if !relative.is_empty() {
            relative.push(b'/');
        }
        relative.extend_from_slice(segment);
    }
    if relative.is_empty() {
        relative.push(b'.');
    }
    Ok(Name { relative, slash })
}

/// Appends `segment` percent-decoded; a separator, backslash or NUL in any spelling, or a
/// broken escape, is refused.
fn decode(segment: &[u8], out: &mut Vec<u8>) -> Result<(), Refused> {
    let mut i = 0;
    while i < segment.len() {
        let b = match segment[i] {
            b'%' => {
                let hex = segment.get(i + 1..i + 3).ok_or(Refused::Malformed)?;
                let hex = std::str::from_utf8(hex).map_err(|_| Refused::Malformed)?;
                i += 2;
                u8::from_str_radix(hex, 16).map_err(|_| Refused::Malformed)?
            }
            b => b,
        };
        if matches!(b, b'/' | b'\\' | 0) {
            return Err(Refused::Malformed);
        }
        out.push(b);
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Symlinks;

    fn files(prefix: Option<&str>, dot_files: bool) -> Files {
        Files {
            root: "/srv".into(),
            strip_prefix: prefix.map(Into::into),
            index: vec!["index.html".into()],
            cache_control: None,
            precompressed: false,
            dot_files,
            symlinks: Symlinks::Inside,
        }
    }

    fn of(path: &str) -> Result<(String, bool), Refused> {
        name(&files(None, false), path.as_bytes())
            .map(|n| (String::from_utf8(n.relative).unwrap(), n.slash))
    }

    #[test]
    fn names_under_the_root() {
        assert_eq!(of("/"), Ok((".".into(), true)));
        assert_eq!(of("/a/b.css"), Ok(("a/b.css".into(), false)));
        assert_eq!(of("/a//./b.css"), Ok(("a/b.css".into(), false)));
        assert_eq!(of("/docs/"), Ok(("docs".into(), true)));
        assert_eq!(of("/caf%C3%A9.txt"), Ok(("café.txt".into(), false)));
        assert_eq!(of("/a%20b"), Ok(("a b".into(), false)));
        assert_eq!(
            of("/img/x.png;jsessionid=AB.n1"),
            Ok(("img/x.png".into(), false))
        );
        // Decoded once: `%25` is a `%` in the name, not the start of another escape.
        assert_eq!(of("/100%252e"), Ok(("100%2e".into(), false)));
    }

    #[test]
    fn hostile_paths_are_refused() {
        for path in [
            "/../etc/passwd",
            "/a/../../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/%2E%2E/",
            "/..%2fetc%2fpasswd",
            "/a%2fb",
            "/a%5cb",
            "/a\\b",
            "/..\\etc",
            "/a%00.txt",
            "/%c0%ae%c0%ae/etc/passwd",
            "/%c0%af",
            "/%e0%80%af",
            "/%ff",
            "/%",
            "/%4",
            "/%zz",
            "relative",
        ] {
            assert_eq!(of(path), Err(Refused::Malformed), "{path}");
        }
    }

    #[test]
    fn dot_files_hidden_unless_allowed() {
        assert_eq!(of("/.git/config"), Err(Refused::Hidden));
        assert_eq!(of("/a/.htaccess"), Err(Refused::Hidden));
        assert_eq!(of("/%2egit/config"), Err(Refused::Hidden));
        let open = files(None, true);
        assert!(name(&open, b"/.well-known/x").is_ok());
        assert_eq!(name(&open, b"/../x"), Err(Refused::Malformed));
    }

    #[test]
    fn a_prefix_is_taken_off() {
        let f = files(Some("/static"), false);
        let n = name(&f, b"/static/css/a.css").unwrap();
        assert_eq!(n.relative, b"css/a.css");
        assert_eq!(name(&f, b"/static").unwrap().relative, b".");
        assert_eq!(name(&f, b"/staticky/a"), Err(Refused::Hidden));
        assert_eq!(name(&f, b"/other/a"), Err(Refused::Hidden));
    }
}
