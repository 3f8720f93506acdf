//! Keeps WebSphere partition tables across restarts, reloads and binary upgrades (PK48101).
//!
//! Each WebSphere cluster's table is saved to `<state_dir>/partitions-<cluster>.tsv`: a
//! header line, then one `<partition key, 16 hex digits>\t<clone id>` line per entry. The
//! file is written to a temporary name, synced and renamed, so a reader never sees half a
//! table. A background task saves a table at most once per `interval` after it changed,
//! and once more at shutdown. Loading a missing or corrupt file logs and changes nothing.
//!
//! Entries come in two sections, marked by comment lines (older tethers skip comments and
//! load both): partitions requests have used, then partitions servers announced that no
//! request has used yet. A partition that a process only loaded, and that nothing used or
//! announced while it ran for [`KEEP_LOADED_FOR`], is not saved again, so junk a server once
//! announced and no request ever used outlives at most one process that ran that long.
//!
//! During a binary upgrade the old process drains while the new one already learns and
//! saves. Each file names the process that wrote it and when that process started; a
//! process stops saving a table once a newer tether that is still running has written it,
//! so the old process's last saves never overwrite what the new one learned.

use crate::routing::{clone_tag, ClusterRouter, Insert};
use crate::state::snapshot::SharedSnapshot;
use async_trait::async_trait;
use log::{info, warn};
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const HEADER: &str = "# tether partition table v1";
const WRITER: &str = "# writer ";
/// Starts the section of partitions requests have used.
const USED: &str = "# used by requests";
/// Starts the section of partitions no request has used yet. Entries before either marker
/// (files of older tethers) count as unused.
const UNUSED: &str = "# not used by requests yet";
/// How long a process keeps saving partitions it only loaded, neither used nor announced
/// since: long enough that a crash loop does not lose them, short enough that junk dies.
pub const KEEP_LOADED_FOR: Duration = Duration::from_secs(600);

/// When this process started, in ms since the Unix epoch (see [`mark_start`]).
static STARTED_MS: once_cell::sync::Lazy<u64> = once_cell::sync::Lazy::new(|| {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
});

/// Records this process's start time; call once at startup, before any table is saved.
pub fn mark_start() {
    once_cell::sync::Lazy::force(&STARTED_MS);
}

/// The file that holds `cluster`'s table (cluster names are `[A-Za-z0-9._-]+`).
pub fn table_path(state_dir: &Path, cluster: &str) -> PathBuf {
    state_dir.join(format!("partitions-{cluster}.tsv"))
}

fn uptime() -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    Duration::from_millis(now.saturating_sub(*STARTED_MS))
}

/// Writes `router`'s partition table atomically; returns the number of entries written.
/// Partitions only loaded are kept for this process's first [`KEEP_LOADED_FOR`].
pub fn save(router: &ClusterRouter, path: &Path) -> io::Result<usize> {
    save_with(router, path, uptime() < KEEP_LOADED_FOR)
}

/// [`save`], keeping partitions only loaded, neither used nor announced since, or not.
pub fn save_with(router: &ClusterRouter, path: &Path, keep_loaded: bool) -> io::Result<usize> {
    let Some(table) = router.partitions() else {
        return Ok(0);
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tsv.tmp");
    let mut out = io::BufWriter::new(std::fs::File::create(&tmp)?);
    writeln!(out, "{HEADER}")?;
    writeln!(out, "# cluster {}", router.name)?;
    writeln!(out, "{WRITER}{} {}", std::process::id(), *STARTED_MS)?;
    let entries = table.entries_to_save(keep_loaded);
    let mut n = 0;
    for (marker, used) in [(USED, true), (UNUSED, false)] {
        writeln!(out, "{marker}")?;
        for e in entries.iter().filter(|e| e.used == used) {
            if let Some(clone) = router.clone_of_tag(e.clone) {
                writeln!(out, "{:016x}\t{clone}", e.key)?;
                n += 1;
            }
        }
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(n)
}

/// The pid of a tether process, started after this one and still running, that wrote
/// `path`: the new process of a binary upgrade, which now owns the table.
pub fn newer_owner(path: &Path) -> Option<u32> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).ok()?;
    let writer = io::BufReader::new(file)
        .lines()
        .take(3)
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix(WRITER).map(str::to_string))?;
    let (pid, started) = writer.split_once(' ')?;
    let (pid, started): (u32, u64) = (pid.parse().ok()?, started.parse().ok()?);
    (pid != std::process::id() && started > *STARTED_MS && alive(pid)).then_some(pid)
}

fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 sends nothing; it only checks that the process exists.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Saves `router`'s table unless a newer tether owns the file ([`newer_owner`]): the
/// number of entries written, or the owner's pid.
pub fn save_if_ours(router: &ClusterRouter, path: &Path) -> io::Result<Result<usize, u32>> {
    match newer_owner(path) {
        Some(pid) => Ok(Err(pid)),
        None => save(router, path).map(Ok),
    }
}

fn log_taken_over(cluster: &str, path: &Path, pid: u32) {
    info!(
        "cluster {cluster}: not saving the partition table: {} was written by tether process \
         {pid}, which started after this one and now owns it",
        path.display()
    );
}

/// Why a saved table was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("no saved table")]
    Missing,
    #[error("cannot read: {0}")]
    Io(#[from] io::Error),
    #[error("corrupt at line {0}")]
    Corrupt(usize),
}

/// Loads a saved table into `router`'s (empty or not) partition table; returns the number
/// of entries loaded. Entries of clones that are no longer configured are skipped, and so
/// are unused ones that do not fit (a smaller `partition_table_max` than the saver's): used
/// ones load first. A corrupt file loads nothing.
pub fn load(router: &ClusterRouter, path: &Path) -> Result<usize, LoadError> {
    let Some(table) = router.partitions() else {
        return Ok(0);
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(LoadError::Missing),
        Err(e) => return Err(e.into()),
    };
    let mut lines = text.lines().enumerate();
    if lines.next().map(|(_, l)| l) != Some(HEADER) {
        return Err(LoadError::Corrupt(1));
    }
    let clones: HashMap<&str, u32> = router
        .servers()
        .iter()
        .filter_map(|s| s.config.clone_id.as_deref())
        .map(|c| (c, clone_tag(c.as_bytes())))
        .collect();
    // Parse everything before changing anything.
    let mut entries = Vec::new();
    let mut used = false;
    for (i, line) in lines {
        match line {
            USED => used = true,
            UNUSED => used = false,
            _ => {}
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (key, clone) = line.split_once('\t').ok_or(LoadError::Corrupt(i + 1))?;
        let key = u64::from_str_radix(key, 16).map_err(|_| LoadError::Corrupt(i + 1))?;
        if key == 0 {
            return Err(LoadError::Corrupt(i + 1));
        }
        if let Some(&tag) = clones.get(clone) {
            entries.push((key, tag, used));
        }
    }
    // Stable: used ones first, each section in file order.
    entries.sort_by_key(|&(_, _, used)| !used);
    let loaded = entries
        .into_iter()
        .filter(|&(key, tag, used)| table.load_key(key, tag, used) != Insert::Refused)
        .count();
    Ok(loaded)
}

/// Loads every WebSphere cluster's saved table; logs what happened.
pub fn load_all(snapshot: &SharedSnapshot, state_dir: &Path) {
    for router in snapshot.load().clusters.iter().filter(|r| r.is_websphere()) {
        let path = table_path(state_dir, &router.name);
        match load(router, &path) {
            Ok(n) => info!(
                "cluster {}: loaded {n} partitions from {}",
                router.name,
                path.display()
            ),
            Err(LoadError::Missing) => info!(
                "cluster {}: no saved partition table at {}",
                router.name,
                path.display()
            ),
            Err(e) => warn!(
                "cluster {}: ignoring saved partition table {}: {e}",
                router.name,
                path.display()
            ),
        }
    }
}

/// Saves every WebSphere cluster's table now (at exit, after Pingora stopped serving).
pub fn save_all(snapshot: &SharedSnapshot, state_dir: &Path) {
    for router in snapshot.load().clusters.iter().filter(|r| r.is_websphere()) {
        let path = table_path(state_dir, &router.name);
        match save_if_ours(router, &path) {
            Ok(Ok(n)) => info!(
                "cluster {}: saved {n} partitions to {}",
                router.name,
                path.display()
            ),
            Ok(Err(pid)) => log_taken_over(&router.name, &path, pid),
            Err(e) => warn!(
                "cluster {}: cannot save partition table to {}: {e}",
                router.name,
                path.display()
            ),
        }
    }
}

/// Background task that saves changed tables.
pub struct Persister {
    snapshot: SharedSnapshot,
    state_dir: PathBuf,
    interval: Duration,
    /// Table generation last saved, per cluster name.
    saved: Mutex<HashMap<String, u64>>,
}

impl Persister {
    pub fn new(snapshot: SharedSnapshot, state_dir: PathBuf, interval: Duration) -> Self {
        Persister {
            snapshot,
            state_dir,
            interval,
            saved: Mutex::default(),
        }
    }

    /// Saves every table that changed since its last save.
    pub fn save_changed(&self) {
        let snapshot = self.snapshot.load();
        let mut saved = self.saved.lock().unwrap_or_else(|e| e.into_inner());
        for router in snapshot.clusters.iter() {
            let Some(table) = router.partitions() else {
                continue;
            };
            let generation = table.generation();
            if saved.get(&router.name) == Some(&generation) {
                continue;
            }
            let path = table_path(&self.state_dir, &router.name);
            match save_if_ours(router, &path) {
                Ok(Ok(_)) => {
                    saved.insert(router.name.clone(), generation);
                }
                Ok(Err(pid)) => {
                    log_taken_over(&router.name, &path, pid);
                    saved.insert(router.name.clone(), generation);
                }
                Err(e) => warn!(
                    "cluster {}: cannot save partition table to {}: {e}",
                    router.name,
                    path.display()
                ),
            }
        }
    }
}

#[async_trait]
impl BackgroundService for Persister {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut tick = tokio::time::interval(self.interval);
        loop {
            tokio::select! {
                _ = tick.tick() => self.save_changed(),
                _ = shutdown.changed() => break,
            }
        }
        self.save_changed();
    }
}

#[cfg(test)]
mod tests;
