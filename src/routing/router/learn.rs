//! Learning the partition table from `$WSPT` response headers of a cluster's servers.

use super::ClusterRouter;
use crate::routing::partitions::{clone_tag, partition_key, Insert};
use crate::routing::wspt;

/// Most new partitions one response may add. A server sends its whole table again with
/// every response, so a larger table is learned over a few responses; a server that sends
/// junk (in one `$WSPT` value or in hundreds) cannot churn the table faster than this.
pub const MAX_NEW_PER_RESPONSE: u32 = 64;

/// What one response's `$WSPT` values did to the table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Learned {
    /// Entries that added or changed a partition.
    pub changed: u32,
    /// Entries naming a clone that is not in the cluster.
    pub unknown_clone: u32,
    /// New partitions not added: the response had added `MAX_NEW_PER_RESPONSE` already.
    /// (A full table no longer refuses; it evicts, see `evicted`.)
    pub full: u32,
    /// Partitions evicted to make room for new ones (unused ones first, then the least
    /// recently used).
    pub evicted: u32,
    /// A value was refused whole (malformed, too long, too many entries): the first reason.
    pub refused: Option<wspt::WsptError>,
}

impl ClusterRouter {
    /// Applies a response that has one `$WSPT` value; see [`learn_wspt_response`].
    ///
    /// [`learn_wspt_response`]: Self::learn_wspt_response
    pub fn learn_wspt(&self, value: &[u8]) -> Learned {
        self.learn_wspt_response([value])
    }

    /// Applies every `$WSPT` value of one response. Only clones of this cluster are
    /// accepted, and the response adds at most `MAX_NEW_PER_RESPONSE` new partitions
    /// (changes to known ones are not limited); anything else changes nothing and is
    /// reported in the result (and counted by the table).
    pub fn learn_wspt_response<'a>(&self, values: impl IntoIterator<Item = &'a [u8]>) -> Learned {
        let mut out = Learned::default();
        let Some(table) = &self.partitions else {
            return out;
        };
        let (mut added, mut refused_values) = (0, 0);
        for value in values {
            let entries = match wspt::parse(value) {
                Ok(entries) => entries,
                Err(e) => {
                    out.refused.get_or_insert(e);
                    refused_values += 1;
                    continue;
                }
            };
            for (partition, clone) in entries {
                if !self.clones.contains_key(clone) {
                    out.unknown_clone += 1;
                    continue;
                }
                let (key, tag) = (partition_key(partition), clone_tag(clone));
                let result = if added < MAX_NEW_PER_RESPONSE {
                    table.insert_key(key, tag)
                } else {
                    table.update_key(key, tag)
                };
                match result {
                    Insert::Added => added += 1,
                    Insert::Evicted => {
                        added += 1;
                        out.evicted += 1;
                    }
                    Insert::Updated => {}
                    Insert::Unchanged => continue,
                    Insert::Refused => {
                        out.full += 1;
                        continue;
                    }
                }
                out.changed += 1;
            }
        }
        // Most responses change nothing: leave the counters' cache line alone then.
        if out.changed > 0 {
            table.count_learned(out.changed as u64);
        }
        let rejected = refused_values + out.unknown_clone + out.full;
        if rejected > 0 {
            table.count_rejected(rejected as u64);
        }
        out
    }

    /// The clone id a partition maps to, if the table knows it and the clone is configured.
    /// Not a use: the entry's eviction rank is left alone (status pages, the demo, tests).
    pub fn partition_owner(&self, partition: &[u8]) -> Option<&str> {
        let tag = self.partitions.as_ref()?.peek(partition)?;
        let &i = self.clone_tags.get(&tag)?;
        self.servers[i].config.clone_id.as_deref()
    }

    /// Clone id of a clone tag, for saving the table.
    pub fn clone_of_tag(&self, tag: u32) -> Option<&str> {
        let &i = self.clone_tags.get(&tag)?;
        self.servers[i].config.clone_id.as_deref()
    }
}

impl ClusterRouter {
    /// The partition table's tag for a clone id of this cluster; `None` for another id.
    pub fn clone_tag_of(&self, clone: &str) -> Option<u32> {
        self.clones
            .contains_key(clone.as_bytes())
            .then(|| clone_tag(clone.as_bytes()))
    }

    /// The clone id a partition table tag stands for.
    pub fn clone_id_of_tag(&self, tag: u32) -> Option<&str> {
        let &i = self.clone_tags.get(&tag)?;
        self.servers[i].config.clone_id.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::MAX_NEW_PER_RESPONSE;
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
        let l = r.learn_wspt(b"8=c1, 9=c1");
        assert_eq!(
            (l.changed, l.evicted, l.full),
            (2, 1, 0),
            "table of 3 is full"
        );
        assert_eq!((t.len(), t.evicted()), (3, 1));
        assert_eq!(t.learned(), 5);
        assert_eq!(t.rejected(), 1 + 1 + 1);
    }

    #[test]
    fn one_response_adds_at_most_its_quota() {
        let r = websphere_router(10_000);
        let t = r.partitions().unwrap();
        let value = |from: u32| -> String {
            (from..from + 100)
                .map(|i| format!("{i}=c1"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let values: Vec<String> = (0..4).map(|v| value(v * 100)).collect();
        let l = r.learn_wspt_response(values.iter().map(|v| v.as_bytes()));
        let quota = MAX_NEW_PER_RESPONSE;
        assert_eq!((l.changed, l.full), (quota, 400 - quota));
        assert_eq!(t.len(), quota as usize);
        // The next response adds the next ones; known partitions cost nothing.
        let l = r.learn_wspt_response(values.iter().map(|v| v.as_bytes()));
        assert_eq!(l.changed, quota);
        assert_eq!(t.len(), 2 * quota as usize);
        // Moves of known partitions are never held back by the quota.
        let moved: String = (0..2 * quota).map(|i| format!("{i}=c2,")).collect();
        let l = r.learn_wspt_response([value(5_000).as_bytes(), moved.as_bytes()]);
        assert_eq!((l.changed, l.full), (quota + 2 * quota, 100 - quota));
        assert_eq!(r.partition_owner(b"0"), Some("c2"));
        assert_eq!(
            t.rejected(),
            (400 - quota + 400 - 2 * quota + 100 - quota) as u64
        );
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
