//! Where a plugin may send a request: only clusters and servers of the config.

use std::collections::HashMap;

/// A cluster (index in the config) and optionally one of its servers (index in the cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub cluster: usize,
    pub server: Option<usize>,
}

/// The names a plugin may use: `cluster` or `cluster/server`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct KnownTargets {
    clusters: HashMap<String, usize>,
    servers: HashMap<(String, String), (usize, usize)>,
}

impl KnownTargets {
    /// From the config's clusters, each with its server names, in config order.
    pub fn new<'a>(clusters: impl IntoIterator<Item = (&'a str, Vec<&'a str>)>) -> Self {
        let mut known = KnownTargets::default();
        for (ci, (cluster, servers)) in clusters.into_iter().enumerate() {
            known.clusters.insert(cluster.to_string(), ci);
            for (si, server) in servers.into_iter().enumerate() {
                known
                    .servers
                    .insert((cluster.to_string(), server.to_string()), (ci, si));
            }
        }
        known
    }

    /// Resolves `cluster` or `cluster/server`; `None` for anything the config does not have.
    pub fn resolve(&self, name: &str) -> Option<Target> {
        let name = name.trim();
        match name.split_once('/') {
            None => self.clusters.get(name).map(|&cluster| Target {
                cluster,
                server: None,
            }),
            Some((c, s)) => {
                self.servers
                    .get(&(c.to_string(), s.to_string()))
                    .map(|&(cluster, server)| Target {
                        cluster,
                        server: Some(server),
                    })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_configured_names_resolve() {
        let k = KnownTargets::new([("shop", vec!["a", "b"]), ("was", vec!["w1"])]);
        assert_eq!(
            k.resolve("shop"),
            Some(Target {
                cluster: 0,
                server: None
            })
        );
        assert_eq!(
            k.resolve("was/w1"),
            Some(Target {
                cluster: 1,
                server: Some(0)
            })
        );
        assert_eq!(
            k.resolve(" shop/b "),
            Some(Target {
                cluster: 0,
                server: Some(1)
            })
        );
        for bad in [
            "",
            "nope",
            "shop/",
            "shop/w1",
            "/a",
            "10.0.0.1:8080",
            "http://evil/",
            "shop/a/b",
        ] {
            assert_eq!(k.resolve(bad), None, "{bad}");
        }
    }
}
