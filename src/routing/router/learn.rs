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

#[cfg(test)]
mod tests {
    use crate::config;
    use crate::routing::{ClusterRouter, WsptError};

    pub(crate) fn websphere_router(max: usize) -> ClusterRouter {
        let yaml = format!(
            "listeners: [{{ name: web, address: 127.0.0.1:1, cluster: was }}]\n\
             clusters:\n  - name: was\n    session_style: websphere\n    websphere: {{ partition_table_max: {max} }}\n    servers:\n\
             \x20     - {{ name: was1, address: 127.0.0.1:9081, clone_id: c1 }}\n\
             \x20     - {{ name: was2, address: 127.0.0.1:9082, clone_id: c2 }}\n"
        );
        let cfg = config::parse(&yaml, "test").unwrap();
        ClusterRouter::new(&cfg.clusters[0], None)
    }

    #[test]
    fn learns_known_clones_and_counts_what_it_refuses() {
        let r = websphere_router(3);
        let t = r.partitions().unwrap();
        let l = r.learn_wspt(b"7329011=c1, -184020=c1, 55=nobody");
        assert_eq!((l.changed, l.unknown_clone, l.refused), (2, 1, None));
        assert_eq!(r.partition_owner(b"7329011"), Some("c1"));
        assert_eq!(
            r.partition_owner(b"55"),
            None,
            "unknown clones change nothing"
        );
        assert_eq!(
            r.learn_wspt(b"7329011=c2").changed,
            1,
            "a later entry replaces"
        );
        assert_eq!(r.partition_owner(b"7329011"), Some("c2"));
        let before = t.len();
        assert_eq!(
            r.learn_wspt(b"1=c1, garbage").refused,
            Some(WsptError::Malformed)
        );
        assert_eq!(
            r.learn_wspt("1=c1,".repeat(2000).as_bytes()).refused,
            Some(WsptError::TooLong)
        );
        assert_eq!(t.len(), before, "refused values change nothing");
        assert_eq!(r.learn_wspt(b"8=c1, 9=c1").full, 1, "table of 3 is full");
        assert_eq!(t.learned(), 4);
        assert_eq!(t.rejected(), 1 + 1 + 1 + 1);
    }

    #[test]
    fn tomcat_clusters_ignore_wspt() {
        let yaml = "listeners: [{ name: web, address: 127.0.0.1:1, cluster: s }]\n\
                    clusters: [{ name: s, servers: [{ name: a, address: 127.0.0.1:2, clone_id: c1 }] }]\n";
        let cfg = config::parse(yaml, "test").unwrap();
        let r = ClusterRouter::new(&cfg.clusters[0], None);
        assert!(r.partitions().is_none());
        assert_eq!(r.learn_wspt(b"1=c1").changed, 0);
    }
}
