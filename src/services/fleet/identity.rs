//! Who this instance is in the fleet: its name (the configured `instance:`, or one chosen
//! at the first start and kept in `state_dir`) and an origin token unique to this process.
//!
//! The name is what operators read (status, "drained by"); the origin is what tells this
//! process's entries from everyone else's. Two instances that share a name (one state_dir
//! for two processes, a name copied between hosts) therefore still apply each other's
//! changes; the heartbeats show the clash (`conflict.rs`).

use crate::config::shared_state::is_name;
use std::path::{Path, PathBuf};

/// The file in `state_dir` that keeps a chosen name across restarts and upgrades.
pub const NAME_FILE: &str = "fleet-instance";

/// Where the name came from (said in the log at start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `shared_state.instance` in the config.
    Configured,
    /// Read from `state_dir`, chosen by an earlier start.
    Kept,
    /// Chosen now and written to `state_dir`.
    Chosen,
    /// Chosen now; there is no `state_dir` (or it cannot be written) to keep it in.
    ThisRunOnly,
}

#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    /// 16 hex digits, random per process.
    pub origin: String,
    pub source: Source,
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        // No entropy source: time and pid still differ between processes.
        let t = crate::routing::wall_ms() ^ u64::from(std::process::id()).rotate_left(40);
        b = t.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes();
    }
    u64::from_le_bytes(b)
}

/// The host's name in the characters a fleet name allows, at most 48 of them.
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it
    // or truncates, and we stop at the first NUL or the end.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name: String = String::from_utf8_lossy(&buf[..end])
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(48)
        .collect();
    if rc != 0 || name.is_empty() {
        "tether".into()
    } else {
        name
    }
}

/// A new default name: the host's name and 8 random hex digits (`web01-3f9a0c1d`), unique
/// to this instance even beside others on the same host.
fn new_name() -> String {
    format!("{}-{:08x}", host_name(), random_u64() as u32)
}

fn name_file(dir: &Path) -> PathBuf {
    dir.join(NAME_FILE)
}

/// The name kept in `dir`, if a valid one is there.
fn kept(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(name_file(dir)).ok()?;
    let name = text.trim();
    is_name(name).then(|| name.to_string())
}

/// Writes `name` to `dir` atomically (temp file, sync, rename).
fn keep(dir: &Path, name: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let file = name_file(dir);
    let tmp = file.with_extension("tmp");
    let mut out = std::fs::File::create(&tmp)?;
    writeln!(out, "{name}")?;
    out.sync_all()?;
    std::fs::rename(tmp, file)
}

/// This process's identity: the configured name, else the one kept in `state_dir`, else a
/// new one (kept there when there is a `state_dir`).
pub fn resolve(configured: Option<&str>, state_dir: Option<&Path>) -> Identity {
    let origin = format!("{:016x}", random_u64());
    if let Some(name) = configured {
        return Identity {
            name: name.to_string(),
            origin,
            source: Source::Configured,
        };
    }
    let Some(dir) = state_dir else {
        return Identity {
            name: new_name(),
            origin,
            source: Source::ThisRunOnly,
        };
    };
    if let Some(name) = kept(dir) {
        return Identity {
            name,
            origin,
            source: Source::Kept,
        };
    }
    let name = new_name();
    let source = match keep(dir, &name) {
        Ok(()) => Source::Chosen,
        Err(e) => {
            log::warn!(
                "fleet: cannot keep the instance name in {}: {e}; it is {name} until tether stops",
                name_file(dir).display()
            );
            Source::ThisRunOnly
        }
    };
    Identity {
        name,
        origin,
        source,
    }
}

impl Identity {
    /// Where the name came from, for the start's log line.
    pub fn describe(&self, state_dir: Option<&Path>) -> String {
        let file = || state_dir.map_or_else(String::new, |d| name_file(d).display().to_string());
        match self.source {
            Source::Configured => "set in shared_state.instance".into(),
            Source::Kept => format!("kept in {}", file()),
            Source::Chosen => format!("chosen now, kept in {}", file()),
            Source::ThisRunOnly => {
                "chosen for this run (no state_dir to keep it in; set shared_state.instance \
                 for a name that stays)"
                    .into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tether-identity-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_chosen_name_is_kept_and_unique_per_state_dir() {
        let (one, two) = (dir("one"), dir("two"));
        let first = resolve(None, Some(&one));
        assert_eq!(first.source, Source::Chosen);
        assert!(is_name(&first.name), "{}", first.name);
        let again = resolve(None, Some(&one));
        assert_eq!(again.source, Source::Kept);
        assert_eq!(again.name, first.name, "the same name after a restart");
        assert_ne!(again.origin, first.origin, "but a new origin per process");
        let other = resolve(None, Some(&two));
        assert_ne!(other.name, first.name, "another instance on this host");
        for d in [one, two] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    #[test]
    fn configured_names_win_and_no_state_dir_means_a_fresh_name() {
        let d = dir("configured");
        let c = resolve(Some("edge-1"), Some(&d));
        assert_eq!((c.name.as_str(), c.source), ("edge-1", Source::Configured));
        assert!(
            !name_file(&d).exists(),
            "nothing written for a configured name"
        );
        let (a, b) = (resolve(None, None), resolve(None, None));
        assert_eq!(a.source, Source::ThisRunOnly);
        assert_ne!(a.name, b.name);
        assert!(a.name.len() <= 64 && is_name(&a.name));
    }

    #[test]
    fn a_damaged_name_file_is_replaced() {
        let d = dir("damaged");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(name_file(&d), "not|a name\n").unwrap();
        let id = resolve(None, Some(&d));
        assert_eq!(id.source, Source::Chosen);
        assert_eq!(kept(&d).as_deref(), Some(id.name.as_str()));
        let _ = std::fs::remove_dir_all(d);
    }
}
