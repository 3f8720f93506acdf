//! Applying what other instances published: partition entries into the local tables,
//! operators' changes into the servers' live state.

use super::keys::{self, PartitionValue, ServerValue};
use super::{lock, metrics, Fleet};
use crate::routing::ClusterRouter;
use crate::services::control::Control;

/// What became of one entry from Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// It changed this instance's state.
    Changed,
    /// This instance already had it (or something newer, or it was its own).
    Same,
    Garbage,
    /// It names a cluster, server or clone this instance's config does not have.
    Unknown,
}

impl Applied {
    /// Counts the outcome (entries of `kind`) in the metrics.
    pub fn count(self, kind: &str) {
        match self {
            Applied::Changed => metrics::APPLIED.with_label_values(&[kind]).inc(),
            Applied::Same => {}
            Applied::Garbage => metrics::REJECTED.with_label_values(&["garbage"]).inc(),
            Applied::Unknown => metrics::REJECTED.with_label_values(&["unknown"]).inc(),
        }
    }
}

/// Applies a partition entry (hash field and value) to `router`'s table.
pub fn partition(fleet: &Fleet, router: &ClusterRouter, field: &[u8], value: &[u8]) -> Applied {
    let (Some(table), Some(key), Some(v)) = (
        router.partitions(),
        keys::parse_partition_field(field),
        PartitionValue::parse(value),
    ) else {
        return Applied::Garbage;
    };
    fleet.saw(v.version);
    let Some(tag) = router.clone_tag_of(&v.clone) else {
        return Applied::Unknown;
    };
    match table.apply_key(key, tag) {
        crate::routing::Insert::Added
        | crate::routing::Insert::Evicted
        | crate::routing::Insert::Updated => Applied::Changed,
        _ => Applied::Same,
    }
}

/// Applies an operator's change of one server (hash field and value), unless the fleet
/// already knows a change as new or newer.
pub fn server(fleet: &Fleet, control: &Control, field: &[u8], value: &[u8]) -> Applied {
    let (Some((cluster, server)), Some(v)) =
        (keys::parse_server_field(field), ServerValue::parse(value))
    else {
        return Applied::Garbage;
    };
    fleet.saw(v.version);
    let name = keys::server_field(cluster, server);
    {
        let mut known = lock(&fleet.servers);
        if known.get(&name).is_some_and(|k| k.version >= v.version) {
            return Applied::Same;
        }
        known.insert(name, v.clone());
    }
    match control.apply_shared(cluster, server, v.state.map(|s| (s, v.weight))) {
        Ok(true) => {
            log::info!(
                "fleet: {cluster}/{server} set to {}{} by {}",
                keys::state_text(v.state),
                v.state
                    .map_or(String::new(), |_| format!(" (weight {})", v.weight)),
                v.instance
            );
            Applied::Changed
        }
        Ok(false) => Applied::Same,
        Err(_) => Applied::Unknown,
    }
}
