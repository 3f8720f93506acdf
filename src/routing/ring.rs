//! Consistent hashing of session ids (Ketama, built by `pingora-ketama`) onto server indices.
//!
//! The ring holds every member once, whatever its live state; a look-up walks clockwise
//! from the session's point to the first member the caller accepts. That is the same
//! answer a ring of only the accepted members would give, so an orphaned session lands on
//! the same server in every tether instance and only the sessions of a removed server move.

use pingora_ketama::{Bucket, Continuum};
use std::collections::HashMap;
use std::net::SocketAddr;

/// After this many ring points without a match, check that any member can match at all.
const WALK_BEFORE_SCAN: usize = 64;

pub struct Ring {
    continuum: Continuum,
    /// Ring node address → server index.
    index: HashMap<SocketAddr, usize>,
    /// Server indices of the members.
    members: Box<[usize]>,
    /// Points on the ring (upper bound of a full walk).
    points: usize,
}

impl Ring {
    /// Builds a ring over `members` (server index, address, weight); addresses are unique.
    pub fn new(members: &[(usize, SocketAddr, u32)]) -> Ring {
        let buckets: Vec<Bucket> = members.iter().map(|&(_, a, w)| Bucket::new(a, w)).collect();
        Ring {
            continuum: Continuum::new(&buckets),
            index: members.iter().map(|&(i, a, _)| (a, i)).collect(),
            members: members.iter().map(|&(i, ..)| i).collect(),
            points: members.iter().map(|&(.., w)| w as usize * 160).sum(),
        }
    }

    /// The first member clockwise from `key`'s point that `ok` accepts.
    ///
    /// `peek` must answer like `ok` without side effects; it is only used to stop a long
    /// walk early when no member can be accepted.
    pub fn pick(
        &self,
        key: &[u8],
        mut ok: impl FnMut(usize) -> bool,
        peek: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        if self.members.is_empty() {
            return None;
        }
        let mut last = usize::MAX;
        for (step, addr) in self.continuum.node_iter(key).take(self.points).enumerate() {
            let server = self.index[addr];
            if server != last {
                if ok(server) {
                    return Some(server);
                }
                last = server;
            }
            if step == WALK_BEFORE_SCAN && !self.members.iter().any(|&m| peek(m)) {
                return None;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(n: usize, skip: Option<usize>) -> Ring {
        let members: Vec<(usize, SocketAddr, u32)> = (0..n)
            .filter(|&i| Some(i) != skip)
            .map(|i| {
                (
                    i,
                    SocketAddr::from(([10, 0, (i / 250) as u8, (i % 250) as u8], 8080)),
                    1,
                )
            })
            .collect();
        Ring::new(&members)
    }

    #[test]
    fn same_key_same_server_across_builds_and_calls() {
        let (a, b) = (ring(10, None), ring(10, None));
        for k in 0..1000u32 {
            let key = k.to_be_bytes();
            let first = a.pick(&key, |_| true, |_| true);
            assert_eq!(first, b.pick(&key, |_| true, |_| true));
            assert_eq!(first, a.pick(&key, |_| true, |_| true));
        }
    }

    #[test]
    fn skipping_a_member_equals_removing_it() {
        let full = ring(10, None);
        let without = ring(10, Some(3));
        for k in 0..2000u32 {
            let key = k.to_be_bytes();
            let skipped = full.pick(&key, |s| s != 3, |s| s != 3);
            assert_eq!(skipped, without.pick(&key, |_| true, |_| true));
        }
    }

    #[test]
    fn nothing_acceptable_is_none() {
        assert_eq!(ring(50, None).pick(b"x", |_| false, |_| false), None);
        assert_eq!(ring(0, None).pick(b"x", |_| true, |_| true), None);
    }
}
