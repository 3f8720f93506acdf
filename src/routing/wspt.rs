//! The `$WSPT` response header: `partitionID=cloneID` entries, comma-separated.
//!
//! IBM never published the format; tether's (DESIGN section 3, docs/websphere.md) is
//! `$WSPT: 7329011=clone1a, -184020=clone1a`. White space around entries is ignored. A value
//! is taken whole or not at all: one malformed entry, more than 8 KiB or more than 1,024
//! entries and the value is refused. How many new partitions one response may add, over all
//! its values, is bounded where they are applied (`router/learn.rs`).

/// Longest `$WSPT` value accepted.
pub const MAX_WSPT_LEN: usize = 8 * 1024;
/// Most entries in one `$WSPT` value.
pub const MAX_WSPT_ENTRIES: usize = 1024;
/// Longest partition or clone id.
const MAX_ID_LEN: usize = 64;

/// Why a `$WSPT` value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsptError {
    TooLong,
    TooManyEntries,
    Malformed,
}

fn is_id(s: &[u8]) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_LEN
        && s.iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn trim(s: &[u8]) -> &[u8] {
    s.trim_ascii()
}

fn entry(raw: &[u8]) -> Option<(&[u8], &[u8])> {
    let raw = trim(raw);
    let eq = raw.iter().position(|&b| b == b'=')?;
    let (partition, clone) = (trim(&raw[..eq]), trim(&raw[eq + 1..]));
    (is_id(partition) && is_id(clone)).then_some((partition, clone))
}

/// Checks a whole value; on success returns its entries in order.
pub fn parse(value: &[u8]) -> Result<impl Iterator<Item = (&[u8], &[u8])>, WsptError> {
    if value.len() > MAX_WSPT_LEN {
        return Err(WsptError::TooLong);
    }
    let entries = || value.split(|&b| b == b',').filter(|e| !trim(e).is_empty());
    let mut n = 0;
    for e in entries() {
        n += 1;
        if n > MAX_WSPT_ENTRIES {
            return Err(WsptError::TooManyEntries);
        }
        entry(e).ok_or(WsptError::Malformed)?;
    }
    Ok(entries().filter_map(entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(v: &str) -> Vec<(String, String)> {
        parse(v.as_bytes())
            .unwrap()
            .map(|(p, c)| {
                (
                    String::from_utf8(p.to_vec()).unwrap(),
                    String::from_utf8(c.to_vec()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn accepts_the_documented_format() {
        let pairs = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ok("7329011=clone1a, -184020=clone1a"),
            pairs(&[("7329011", "clone1a"), ("-184020", "clone1a")])
        );
        assert_eq!(ok(" 1 = a ,2=b,"), pairs(&[("1", "a"), ("2", "b")]));
        assert_eq!(ok(""), pairs(&[]));
    }

    #[test]
    fn refuses_bad_values_whole() {
        let cases: &[(&[u8], WsptError)] = &[
            (b"7329011", WsptError::Malformed),
            (b"1=a, 2", WsptError::Malformed),
            (b"=a", WsptError::Malformed),
            (b"1=", WsptError::Malformed),
            (b"1=a b", WsptError::Malformed),
            (b"1=a=b", WsptError::Malformed),
            (b"1=\xff", WsptError::Malformed),
            (b"1=<script>", WsptError::Malformed),
        ];
        for (v, want) in cases {
            assert_eq!(
                parse(v).err(),
                Some(*want),
                "{}",
                String::from_utf8_lossy(v)
            );
        }
        let long = format!("1={}", "a".repeat(MAX_WSPT_LEN));
        assert_eq!(parse(long.as_bytes()).err(), Some(WsptError::TooLong));
        let many: String = (0..=MAX_WSPT_ENTRIES).map(|i| format!("{i}=c,")).collect();
        assert!(many.len() <= MAX_WSPT_LEN);
        assert_eq!(
            parse(many.as_bytes()).err(),
            Some(WsptError::TooManyEntries)
        );
        let id = "p".repeat(MAX_ID_LEN + 1);
        assert_eq!(
            parse(format!("{id}=c").as_bytes()).err(),
            Some(WsptError::Malformed)
        );
    }
}
