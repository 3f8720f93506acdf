//! What curl gets, for the tests that hold tether's answers to a real client: the status,
//! the fields and the body as they came on the wire (or decoded, with `--compressed`).

use std::collections::HashMap;
use std::process::Command;

pub struct Got {
    pub status: u16,
    /// Lower-case names; the last field of a name.
    pub fields: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Got {
    /// A field's value, or "" when the answer has none.
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", String::as_str)
    }
}

/// `curl -s -i` with `args` on `url`; the path goes as written (`--path-as-is`).
pub fn curl(args: &[&str], url: &str) -> Got {
    let out = Command::new("curl")
        .args(["-s", "-i", "--max-time", "60", "--path-as-is"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl");
    let raw = out.stdout;
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{url}: no head in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1)?.parse().ok())
        .unwrap_or_else(|| panic!("{url}: no status in {head:?}"));
    let fields = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Got {
        status,
        fields,
        body: raw[end + 4..].to_vec(),
    }
}
