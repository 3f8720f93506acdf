//! Learning the partition table from `$WSPT` response headers of a cluster's servers.

use super::ClusterRouter;
use crate::routing::partitions::{clone_tag, Insert};
use crate::routing::wspt;

/// What one `$WSPT` value did to the table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Learned {
    /// Entries that added or changed a partition.
    pub changed: u32,
    /// Entries naming a clone that is not in the cluster.
    pub unknown_clone: u32,
    /// New partitions refused because the table is full.
    pub full: u32,
    /// The whole value was refused (malformed, too long, too many entries).
    pub refused: Option<wspt::WsptError>,
}

impl ClusterRouter {
    /// Applies one `$WSPT` value. Only clones of this cluster are accepted; anything else
    /// changes nothing and is reported in the result (and counted by the table).
    pub fn learn_wspt(&self, value: &[u8]) -> Learned {
        let mut out = Learned::default();
        let Some(table) = &self.partitions else {
            return out;
        };
        let entries = match wspt::parse(value) {
            Ok(entries) => entries,
            Err(e) => {
                out.refused = Some(e);
                table.count_rejected(1);
                return out;
            }
        };
        for (partition, clone) in entries {
            if !self.clones.contains_key(clone) {
                out.unknown_clone += 1;
                continue;
            }
            match table.insert(partition, clone_tag(clone)) {
                Insert::Added | Insert::Updated => out.changed += 1,
                Insert::Unchanged => {}
                Insert::Full => out.full += 1,
            }
        }
        table.count_learned(out.changed as u64);
        table.count_rejected((out.unknown_clone + out.full) as u64);
        out
    }

    /// The clone id a partition maps to, if the table knows it and the clone is configured.
    pub fn partition_owner(&self, partition: &[u8]) -> Option<&str> {
        let tag = self.partitions.as_ref()?.get(partition)?;
        let &i = self.clone_tags.get(&tag)?;
        self.servers[i].config.clone_id.as_deref()
    }

    /// Clone id of a clone tag, for saving the table.
    pub fn clone_of_tag(&self, tag: u32) -> Option<&str> {
        let &i = self.clone_tags.get(&tag)?;
        self.servers[i].config.clone_id.as_deref()
    }
}
