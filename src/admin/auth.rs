//! Bearer-token check of the admin API, compared in constant time.

/// Is a call with this `Authorization` header allowed? Always, when no token is set.
pub fn allowed(token: Option<&str>, authorization: Option<&[u8]>) -> bool {
    let Some(token) = token else {
        return true;
    };
    let Some(given) = authorization.and_then(|a| a.strip_prefix(b"Bearer ")) else {
        return false;
    };
    constant_time_eq(given.trim_ascii(), token.as_bytes())
}

/// Compares without stopping at the first difference, so timing does not reveal how much
/// of a guess was right. (The length is not secret.)
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        assert!(allowed(None, None));
        assert!(allowed(None, Some(b"Bearer anything")));
        assert!(allowed(Some("s3cret"), Some(b"Bearer s3cret")));
        assert!(!allowed(Some("s3cret"), Some(b"Bearer s3cre")));
        assert!(!allowed(Some("s3cret"), Some(b"Bearer s3creT")));
        assert!(!allowed(Some("s3cret"), Some(b"Basic s3cret")));
        assert!(!allowed(Some("s3cret"), Some(b"s3cret")));
        assert!(!allowed(Some("s3cret"), None));
    }
}
