//! Durations written as `500ms`, `10s`, `2m` or `1h` in the config file (core and plugins).

use std::time::Duration;

/// Parses `<integer><unit>` with unit `ms`, `s`, `m` or `h`. Decimals are not allowed; the
/// error says what to write instead (`1.5s` → `1500ms`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if let Some(rest) = unit.strip_prefix('.') {
        return Err(decimal(text, number, rest));
    }
    if number.is_empty() {
        return Err(format!(
            "`{text}` is not a duration such as `500ms`, `10s`, `2m` or `1h`"
        ));
    }
    if unit.is_empty() {
        return Err(format!(
            "`{text}` has no unit: write a duration such as `{number}s` (units ms, s, m, h)"
        ));
    }
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is too long"))?;
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

/// The message for `1.5s`: decimals are not allowed, and the whole number to write.
fn decimal(text: &str, whole: &str, rest: &str) -> String {
    let split = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (fraction, unit) = rest.split_at(split);
    let per_unit: Option<u64> = match unit {
        "s" => Some(1_000),
        "m" => Some(60_000),
        "h" => Some(3_600_000),
        _ => None,
    };
    let value: Option<f64> = format!("{whole}.{fraction}").parse().ok();
    let hint = match (value, per_unit) {
        (Some(v), Some(ms)) if (v * ms as f64).fract() == 0.0 => {
            format!(": write `{}ms`", (v * ms as f64) as u64)
        }
        _ => String::new(),
    };
    format!("`{text}`: decimals are not allowed{hint}")
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

    #[test]
    fn errors_say_what_to_write() {
        let msg = |t: &str| parse_duration(t).unwrap_err();
        assert!(
            msg("5").contains("write a duration such as `5s`"),
            "{}",
            msg("5")
        );
        assert!(msg("1.5s").contains("decimals are not allowed: write `1500ms`"));
        assert!(msg("0.25m").contains("write `15000ms`"));
        assert!(msg("1.5ms").contains("decimals are not allowed"));
        assert!(msg("10d").contains("unknown unit `d`"));
        assert!(msg("s").contains("not a duration such as"));
    }
}
