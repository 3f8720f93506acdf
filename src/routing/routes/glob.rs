//! mod_jk's URI patterns: `*` matches any run of bytes (also `/`), `?` exactly one byte;
//! everything else is literal. Matched in place, without allocating.

/// Does `text` match `pattern`?
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last `*`: (pattern index after it, text index it covers to).
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p + 1, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                // Let the last `*` swallow one more byte and try again.
                Some((sp, st)) => {
                    p = sp;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

/// Bytes that must match literally: the pattern's specificity (longer wins).
pub fn literal_len(pattern: &[u8]) -> usize {
    pattern.iter().filter(|&&c| c != b'*' && c != b'?').count()
}

pub fn has_wildcards(pattern: &[u8]) -> bool {
    pattern.iter().any(|&c| c == b'*' || c == b'?')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mod_jk_wildcards() {
        for (pattern, text, want) in [
            ("/shop/*", "/shop/", true),
            ("/shop/*", "/shop/cart/item", true),
            ("/shop/*", "/shop", false),
            ("/shop*", "/shop", true),
            ("/shop*", "/shopping/x", true),
            ("/*.jsp", "/a/b/c.jsp", true),
            ("/*.jsp", "/a/b/c.jspx", false),
            ("/shop/*.gif", "/shop/img/a.gif", true),
            ("/shop/*.gif", "/shop/img/a.png", false),
            ("/a?c", "/abc", true),
            ("/a?c", "/ac", false),
            ("/a*b*c", "/aXbYbZc", true),
            ("/a*b*c", "/aXbYbZ", false),
            ("/login", "/login", true),
            ("/login", "/login/", false),
            ("*", "", true),
            ("", "", true),
            ("", "/", false),
        ] {
            assert_eq!(
                matches(pattern.as_bytes(), text.as_bytes()),
                want,
                "{pattern} ~ {text}"
            );
        }
        assert_eq!(literal_len(b"/shop/*.gif"), 10);
        assert!(has_wildcards(b"/a?"));
        assert!(!has_wildcards(b"/a"));
    }
}
