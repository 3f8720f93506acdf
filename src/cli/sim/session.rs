//! Servlet session-id rules: where a request names its session (shared by every sim),
//! and how new Tomcat ids look.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

const PATH_PARAM: &str = ";jsessionid=";
const COOKIE_NAME: &[u8] = b"JSESSIONID";

/// Session ids the request asks for, in the order the server should try them.
///
/// A non-empty `;jsessionid=` path parameter is the only candidate when present;
/// otherwise every `JSESSIONID` cookie across all `Cookie` headers, in order.
pub(crate) fn requested_ids(path: &str, headers: &[(String, Vec<u8>)]) -> Vec<String> {
    if let Some(id) = path_param_id(path) {
        return vec![id.to_string()];
    }
    headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("cookie"))
        .flat_map(|(_, value)| value.split(|&b| b == b';'))
        .filter_map(|pair| {
            let eq = pair.iter().position(|&b| b == b'=')?;
            let (name, value) = (pair[..eq].trim_ascii(), pair[eq + 1..].trim_ascii());
            (name == COOKIE_NAME).then_some(unquote(value))
        })
        .filter(|v| !v.is_empty())
        // Ids are ASCII; a non-UTF-8 cookie can never name one of our sessions.
        .filter_map(|v| std::str::from_utf8(v).ok().map(str::to_string))
        .collect()
}

/// The `;jsessionid=` value: it ends at `?`, `;`, `/`, `#` or the end of the target.
fn path_param_id(path: &str) -> Option<&str> {
    let before_query = path.split(['?', '#']).next().unwrap_or_default();
    let start = before_query.find(PATH_PARAM)? + PATH_PARAM.len();
    let rest = &path[start..];
    let id = &rest[..rest.find(['?', ';', '/', '#']).unwrap_or(rest.len())];
    (!id.is_empty()).then_some(id)
}

fn unquote(v: &[u8]) -> &[u8] {
    match v {
        [b'"', inner @ .., b'"'] => inner,
        _ => v,
    }
}

/// Generates session ids (Tomcat-shaped via `session_id`) with a lock-free splitmix64 sequence.
pub(crate) struct IdGen {
    state: AtomicU64,
}

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

impl IdGen {
    /// Seeds from std's per-process random hasher keys plus the clock, so ids differ across runs.
    pub(crate) fn new() -> Self {
        let mut hasher = RandomState::new().build_hasher();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        hasher.write_u128(nanos.as_nanos());
        IdGen {
            state: AtomicU64::new(hasher.finish()),
        }
    }

    /// The next pseudo-random value; also feeds the WebSphere sim's id generator.
    pub(crate) fn next_u64(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(GOLDEN_GAMMA, Ordering::Relaxed)
            .wrapping_add(GOLDEN_GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `<32 uppercase hex>.<route>`; like Tomcat, no dot when the server has no jvmRoute.
    pub(crate) fn session_id(&self, route: &str) -> String {
        let hex = format!("{:016X}{:016X}", self.next_u64(), self.next_u64());
        match route {
            "" => hex,
            _ => format!("{hex}.{route}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cookies(values: &[&str]) -> Vec<(String, Vec<u8>)> {
        values
            .iter()
            .map(|v| ("cookie".to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn path_param_wins_and_ends_at_delimiters() {
        let h = cookies(&["JSESSIONID=fromcookie"]);
        assert_eq!(requested_ids("/a;jsessionid=ABC.r1?x=1", &h), ["ABC.r1"]);
        assert_eq!(requested_ids("/a;jsessionid=ABC;v=2/b", &[]), ["ABC"]);
        assert_eq!(requested_ids("/a;jsessionid=ABC#frag", &[]), ["ABC"]);
        assert_eq!(requested_ids("/a;jsessionid=ABC", &[]), ["ABC"]);
        // In the query it is not a path parameter; an empty one does not count either.
        assert_eq!(requested_ids("/a?q=;jsessionid=X", &h), ["fromcookie"]);
        assert_eq!(requested_ids("/a;jsessionid=?q", &h), ["fromcookie"]);
    }

    #[test]
    fn cookies_in_order_exact_name_unquoted() {
        let h = cookies(&[
            "a=1; jsessionid=lower; JSESSIONID=\"ONE.r1\"",
            "JSESSIONID=TWO.r2;x=y",
        ]);
        assert_eq!(requested_ids("/", &h), ["ONE.r1", "TWO.r2"]);
        let mut odd = cookies(&["JSESSIONID=; JSESSIONID"]);
        odd.push(("cookie".into(), b"JSESSIONID=\xff".to_vec()));
        assert!(requested_ids("/", &odd).is_empty());
    }

    #[test]
    fn ids_have_tomcat_shape_and_differ() {
        let ids = IdGen::new();
        let (a, b) = (ids.session_id("node1"), ids.session_id("node1"));
        assert_ne!(a, b);
        let (hex, route) = a.split_once('.').unwrap();
        assert_eq!(route, "node1");
        assert_eq!(hex.len(), 32);
        assert!(hex
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()));
        assert!(hex.chars().all(|c| c.is_ascii_hexdigit()));
        assert!(!ids.session_id("").contains('.'));
    }
}
