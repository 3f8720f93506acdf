//! Durations written as `500ms`, `10s`, `2m` or `1h` in the config file (core and plugins).

use std::time::Duration;

/// Parses `<integer><unit>` with unit `ms`, `s`, `m` or `h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` has no unit (use ms, s, m or h)"))?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 500ms or 10s"))?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => {
            return Err(format!(
                "`{text}` has an unknown unit `{unit}` (use ms, s, m or h)"
            ))
        }
    };
    ms.map(Duration::from_millis)
        .ok_or_else(|| format!("`{text}` is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_rejects_garbage() {
        let cases: &[(&str, Option<u64>)] = &[
            ("500ms", Some(500)),
            ("10s", Some(10_000)),
            ("2m", Some(120_000)),
            ("1h", Some(3_600_000)),
            (" 3s ", Some(3_000)),
            ("0s", Some(0)),
            ("10", None),
            ("s", None),
            ("1.5s", None),
            ("10 s", None),
            ("-1s", None),
            ("10d", None),
            ("99999999999999999999h", None),
        ];
        for (text, want) in cases {
            let got = parse_duration(text).ok().map(|d| d.as_millis() as u64);
            assert_eq!(got, *want, "{text}");
        }
    }
}
