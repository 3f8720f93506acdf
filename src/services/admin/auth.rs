//! Bearer-token check of the admin API, compared in constant time, and the role the token
//! gives.

use crate::config::Role;

/// The role a call with this `Authorization` header has: `admin` for `token`, the role of
/// a `role_tokens` entry, `admin` for everyone when no token is set at all; `None` when
/// it must be refused.
pub fn role(
    token: Option<&str>,
    role_tokens: &[(String, Role)],
    authorization: Option<&[u8]>,
) -> Option<Role> {
    if token.is_none() && role_tokens.is_empty() {
        return Some(Role::Admin);
    }
    let given = authorization
        .and_then(|a| a.strip_prefix(b"Bearer "))?
        .trim_ascii();
    // Every token is compared, whichever matches, so timing says nothing of which.
    let mut found = None;
    let all = token
        .map(|t| (t, Role::Admin))
        .into_iter()
        .chain(role_tokens.iter().map(|(t, r)| (t.as_str(), *r)));
    for (t, r) in all {
        if constant_time_eq(given, t.as_bytes()) {
            found = Some(r);
        }
    }
    found
}

/// Is a call with this `Authorization` header allowed? Always, when no token is set.
#[cfg(test)]
fn allowed(token: Option<&str>, authorization: Option<&[u8]>) -> bool {
    role(token, &[], authorization).is_some()
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

    #[test]
    fn roles() {
        let more = [
            ("r3ad".to_string(), Role::Read),
            ("0perate".to_string(), Role::Operate),
        ];
        let role = |a: &[u8]| role(Some("adm1n"), &more, Some(a));
        assert_eq!(role(b"Bearer adm1n"), Some(Role::Admin));
        assert_eq!(role(b"Bearer r3ad"), Some(Role::Read));
        assert_eq!(role(b"Bearer 0perate"), Some(Role::Operate));
        assert_eq!(role(b"Bearer other"), None);
        assert_eq!(
            super::role(None, &more, Some(b"Bearer r3ad")),
            Some(Role::Read)
        );
        assert_eq!(
            super::role(None, &more, None),
            None,
            "tokens without token_file"
        );
        assert_eq!(super::role(None, &[], None), Some(Role::Admin));
    }
}
