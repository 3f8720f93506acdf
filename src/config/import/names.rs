//! Names tether accepts (1-64 of `A-Z a-z 0-9 _ - .`), made from the source's names, and
//! the values a cluster takes once (addresses, routes, clone ids), claimed by one item each.

use std::collections::HashSet;

/// Hands out valid, unique names within one scope (clusters, or one cluster's servers).
#[derive(Default)]
pub struct Namer {
    taken: HashSet<String>,
}

impl Namer {
    /// A valid name for `raw`, unique in this scope, and a note when it had to change.
    pub fn name(&mut self, raw: &str) -> (String, Option<String>) {
        let mut base: String = raw
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if base.is_empty() {
            base = "unnamed".into();
        }
        base.truncate(64);
        let mut name = base.clone();
        let mut n = 2;
        while self.taken.contains(&name) {
            let suffix = format!("-{n}");
            let mut b = base.clone();
            b.truncate(64 - suffix.len());
            name = format!("{b}{suffix}");
            n += 1;
        }
        self.taken.insert(name.clone());
        let note = (name != raw).then(|| {
            format!("named `{raw}` in the source; tether names are 1-64 of A-Z a-z 0-9 _ - .")
        });
        (name, note)
    }
}

/// Values of one kind that one cluster takes once each, with the item that claimed each.
#[derive(Default)]
pub struct Claims<'a> {
    taken: Vec<(String, &'a str)>,
}

impl<'a> Claims<'a> {
    /// Claims `value` for `item`; the item that already holds it, if one does.
    pub fn claim(&mut self, value: &str, item: &'a str) -> Option<&'a str> {
        match self.taken.iter().find(|(v, _)| v == value) {
            Some((_, first)) => Some(first),
            None => {
                self.taken.push((value.to_string(), item));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_and_repeated_names_are_changed_and_said() {
        let mut n = Namer::default();
        assert_eq!(n.name("shop").0, "shop");
        assert!(n.name("shop2").1.is_none());
        let (name, note) = n.name("My Cluster/1");
        assert_eq!(name, "My_Cluster_1");
        assert!(note.unwrap().contains("My Cluster/1"));
        assert_eq!(n.name("My Cluster 1").0, "My_Cluster_1-2");
        assert_eq!(n.name("").0, "unnamed");
        let long = "x".repeat(80);
        assert_eq!(n.name(&long).0.len(), 64);
        assert_eq!(n.name(&long).0, format!("{}-2", "x".repeat(62)));
    }

    #[test]
    fn a_value_is_claimed_once_and_the_first_holder_named() {
        let mut c = Claims::default();
        assert_eq!(c.claim("10.0.0.1:8009", "a"), None);
        assert_eq!(c.claim("10.0.0.2:8009", "b"), None);
        assert_eq!(c.claim("10.0.0.1:8009", "c"), Some("a"));
        assert_eq!(c.claim("10.0.0.1:8009", "d"), Some("a"));
    }
}
