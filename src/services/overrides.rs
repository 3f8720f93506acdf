//! Operators' run-time changes (server state and weight) saved under `state_dir`, so a
//! restart or a binary upgrade keeps them, as a reload does.
//!
//! The file `<state_dir>/overrides.json` maps cluster → server → `{state, weight}` for every
//! server changed at run time. It is rewritten atomically (temp file + rename) after each
//! change and read once at start; a missing or unreadable file changes nothing.

use crate::config::ServerState;
use crate::state::snapshot::Snapshot;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Override {
    state: String,
    weight: u32,
}

type Overrides = BTreeMap<String, BTreeMap<String, Override>>;

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join("overrides.json")
}

/// Writes every overridden server of `snapshot`.
pub fn save(snapshot: &Snapshot, state_dir: &Path) -> io::Result<()> {
    let mut all = Overrides::new();
    for router in snapshot.clusters.iter() {
        for s in router.servers().iter().filter(|s| s.live.is_overridden()) {
            all.entry(router.name.clone()).or_default().insert(
                s.config.name.clone(),
                Override {
                    state: s.live.state().name().to_string(),
                    weight: s.live.weight(),
                },
            );
        }
    }
    std::fs::create_dir_all(state_dir)?;
    let file = path(state_dir);
    let tmp = file.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&all)?)?;
    std::fs::rename(tmp, file)
}

fn parse_state(s: &str) -> Option<ServerState> {
    match s {
        "active" => Some(ServerState::Active),
        "draining" => Some(ServerState::Draining),
        "stopped" => Some(ServerState::Stopped),
        _ => None,
    }
}

/// Applies saved overrides to the servers `snapshot` still has; returns how many applied.
pub fn load(snapshot: &Snapshot, state_dir: &Path) -> Result<usize, String> {
    let text = match std::fs::read_to_string(path(state_dir)) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e.to_string()),
    };
    let all: Overrides = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let mut n = 0;
    for router in snapshot.clusters.iter() {
        let Some(servers) = all.get(&router.name) else {
            continue;
        };
        for s in router.servers() {
            let Some(o) = servers.get(&s.config.name) else {
                continue;
            };
            let Some(state) = parse_state(&o.state) else {
                continue;
            };
            if !(1..=crate::config::MAX_WEIGHT).contains(&o.weight) {
                continue;
            }
            s.live.override_state(state);
            s.live.override_weight(o.weight);
            n += 1;
        }
    }
    Ok(n)
}
