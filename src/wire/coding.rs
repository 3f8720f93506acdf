//! Content codings and the client's `Accept-Encoding`: which of the codings tether can give
//! a client takes most gladly (RFC 9110 §12.5.3: q-values, `*`, `q=0` as a refusal).

/// A content coding tether sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Br,
    Gzip,
    Zstd,
}

impl Coding {
    /// Its name in `Content-Encoding`.
    pub fn name(self) -> &'static str {
        match self {
            Coding::Br => "br",
            Coding::Gzip => "gzip",
            Coding::Zstd => "zstd",
        }
    }

    /// The suffix of a file precompressed with it (`name.br`, `name.gz`, `name.zst`).
    pub fn suffix(self) -> &'static str {
        match self {
            Coding::Br => ".br",
            Coding::Gzip => ".gz",
            Coding::Zstd => ".zst",
        }
    }
}

/// The coding of `offered` (in tether's order of preference) the client's `Accept-Encoding`
/// gives the highest q-value, ties going to the earlier; `None`: identity (no field, or
/// none of them acceptable).
pub fn preferred(accept: Option<&[u8]>, offered: &[Coding]) -> Option<Coding> {
    let accept = std::str::from_utf8(accept?).ok()?;
    let mut best: Option<(Coding, u16)> = None;
    for &coding in offered {
        let q = quality(accept, coding);
        if q > 0 && best.is_none_or(|(_, b)| q > b) {
            best = Some((coding, q));
        }
    }
    best.map(|(c, _)| c)
}

/// The q-value (in thousandths) `accept` gives `coding`: its own item's, else `*`'s, else 0.
fn quality(accept: &str, coding: Coding) -> u16 {
    let mut star = 0;
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let token = parts.next().unwrap_or_default().trim();
        let q = parts
            .find_map(|p| {
                let (k, v) = p.split_once('=')?;
                k.trim()
                    .eq_ignore_ascii_case("q")
                    .then(|| thousandths(v.trim()))
            })
            .unwrap_or(1000);
        let named = token.eq_ignore_ascii_case(coding.name())
            || (coding == Coding::Gzip && token.eq_ignore_ascii_case("x-gzip"));
        if named {
            return q;
        }
        if token == "*" {
            star = q;
        }
    }
    star
}

/// A qvalue (`0`, `0.5`, `1.000`) in thousandths; anything else counts as 0.
fn thousandths(v: &str) -> u16 {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    let valid = matches!(int, "0" | "1")
        && frac.len() <= 3
        && frac.bytes().all(|b| b.is_ascii_digit())
        && (int == "0" || frac.bytes().all(|b| b == b'0'));
    if !valid {
        return 0;
    }
    let mut n: u16 = if int == "1" { 1000 } else { 0 };
    for (i, d) in frac.bytes().enumerate() {
        n += u16::from(d - b'0') * [100, 10, 1][i];
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use Coding::*;

    fn pick(accept: &str) -> Option<Coding> {
        preferred(Some(accept.as_bytes()), &[Br, Gzip])
    }

    #[test]
    fn q_values_decide() {
        assert_eq!(pick("gzip, deflate, br, zstd"), Some(Br));
        assert_eq!(pick("gzip"), Some(Gzip));
        assert_eq!(pick("br;q=0.5, gzip"), Some(Gzip));
        assert_eq!(pick("br;q=0, gzip;q=0.1"), Some(Gzip));
        assert_eq!(pick("BR;Q=1.0"), Some(Br));
        assert_eq!(pick("x-gzip"), Some(Gzip));
        assert_eq!(pick("*"), Some(Br));
        assert_eq!(pick("*;q=0.3, br;q=0.2"), Some(Gzip));
        assert_eq!(pick("gzip;q=0, *"), Some(Br));
        assert_eq!(pick("identity"), None);
        assert_eq!(pick("br;q=0, gzip;q=0"), None);
        assert_eq!(pick("gzip;q=2"), None, "not a qvalue: not acceptable");
        assert_eq!(pick("gzip;q=0.0001"), None);
        assert_eq!(pick(""), None);
        assert_eq!(preferred(None, &[Br, Gzip]), None);
        assert_eq!(preferred(Some(b"br"), &[Gzip]), None);
    }
}
