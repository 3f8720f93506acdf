//! A `Range` request field (RFC 9110 §14.2) against a file of known size: one byte range,
//! or the whole file. Several ranges are answered with the whole file (a server may ignore
//! `Range`), which also leaves a field of a thousand overlapping ranges no work to do.

/// What a `Range` asks of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// No usable range: the whole file (200).
    Whole,
    /// Bytes `start` onward, `len` of them (206).
    Part { start: u64, len: u64 },
    /// A single range that starts past the end (416).
    Unsatisfiable,
}

/// The range `value` asks of a file of `size` bytes.
pub fn parse(value: &[u8], size: u64) -> Range {
    let Some(spec) = value
        .get(..6)
        .filter(|unit| unit.eq_ignore_ascii_case(b"bytes="))
        .map(|_| &value[6..])
    else {
        return Range::Whole;
    };
    if spec.contains(&b',') {
        return Range::Whole;
    }
    let Some(dash) = spec.iter().position(|&b| b == b'-') else {
        return Range::Whole;
    };
    let (first, last) = (trim(&spec[..dash]), trim(&spec[dash + 1..]));
    match (number(first), number(last)) {
        // `-n`: the last n bytes.
        (None, Some(n)) if first.is_empty() => match n.min(size) {
            0 => Range::Unsatisfiable,
            len => Range::Part {
                start: size - len,
                len,
            },
        },
        (Some(start), None) if last.is_empty() => part(start, u64::MAX, size),
        (Some(start), Some(end)) if start <= end => part(start, end, size),
        _ => Range::Whole,
    }
}

fn part(start: u64, end: u64, size: u64) -> Range {
    if start >= size {
        return Range::Unsatisfiable;
    }
    Range::Part {
        start,
        len: end.min(size - 1) - start + 1,
    }
}

fn trim(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

/// Decimal digits only (no sign, no space inside); `None` when empty or too large.
fn number(b: &[u8]) -> Option<u64> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Range::*;

    #[test]
    fn single_ranges() {
        let p = |start, len| Part { start, len };
        assert_eq!(parse(b"bytes=0-99", 1000), p(0, 100));
        assert_eq!(parse(b"bytes=900-", 1000), p(900, 100));
        assert_eq!(parse(b"bytes=-100", 1000), p(900, 100));
        assert_eq!(parse(b"bytes=-5000", 1000), p(0, 1000));
        assert_eq!(parse(b"bytes=990-2000", 1000), p(990, 10));
        assert_eq!(parse(b"Bytes=0-0", 1000), p(0, 1));
        assert_eq!(parse(b"bytes= 5 - 9 ", 1000), p(5, 5));
    }

    #[test]
    fn unsatisfiable_and_ignored() {
        assert_eq!(parse(b"bytes=1000-", 1000), Unsatisfiable);
        assert_eq!(parse(b"bytes=-0", 1000), Unsatisfiable);
        assert_eq!(parse(b"bytes=0-", 0), Unsatisfiable);
        assert_eq!(parse(b"bytes=-1", 0), Unsatisfiable);
        assert_eq!(parse(b"bytes=9-5", 1000), Whole);
        assert_eq!(parse(b"bytes=0-1,5-9", 1000), Whole);
        assert_eq!(parse(b"items=0-1", 1000), Whole);
        assert_eq!(parse(b"bytes=a-b", 1000), Whole);
        assert_eq!(parse(b"bytes=+1-2", 1000), Whole);
        assert_eq!(parse(b"bytes=-", 1000), Whole);
        assert_eq!(parse(b"bytes=99999999999999999999-", 1000), Whole);
        let many: Vec<u8> = (0..1000)
            .flat_map(|i| format!("{i}-{},", i + 1).into_bytes())
            .collect();
        let mut field = b"bytes=".to_vec();
        field.extend_from_slice(&many);
        assert_eq!(parse(&field, 1 << 30), Whole);
    }
}
