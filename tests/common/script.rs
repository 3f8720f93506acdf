//! Helpers of the `script` plugin's tests: a script in a scratch directory, its plugin
//! entry, one series of a metrics scrape.

use super::scratch_dir;
use std::path::{Path, PathBuf};

/// Writes `source` as `script.luau` in a new scratch directory.
pub fn script_dir(tag: &str, source: &str) -> (PathBuf, PathBuf) {
    let dir = scratch_dir(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("script.luau");
    std::fs::write(&file, source).unwrap();
    (dir, file)
}

/// The listener's `plugins:` item for `file`, with more fields (indented 8).
pub fn plugin(file: &Path, extra: &str) -> String {
    format!(
        "      - name: script\n        file: {}\n{extra}",
        file.display()
    )
}

/// The value of one series (name and labels, exactly) in a scrape; 0 when absent.
pub fn series(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}
