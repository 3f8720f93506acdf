//! Smooth weighted round robin over a fixed member list, lock-free on the request path.
//!
//! nginx's smooth WRR mutates every member's "current weight" on each pick, which needs a
//! lock. Its output is periodic, though, so the whole period is computed once when the
//! router is built and the request path only advances an atomic cursor through it. When
//! the period would be too long to precompute, a golden-ratio stride through the weight
//! prefix sums gives the same exact shares per period, well interleaved.

/// Largest precomputed period times member count (work to build it).
const MAX_TABLE_WORK: u64 = 1 << 24;

#[derive(Debug)]
pub enum Schedule {
    /// Precomputed smooth WRR period: positions in the member list.
    Table(Box<[u32]>),
    /// Visit `(k * stride) mod total` of the weight line; `prefix[i]` ends member `i`.
    Stride {
        prefix: Box<[u64]>,
        total: u64,
        stride: u64,
    },
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Schedule {
    /// Builds the schedule for `weights` (all at least 1).
    pub fn new(weights: &[u32]) -> Schedule {
        let g = weights.iter().fold(0u64, |g, &w| gcd(g, w as u64)).max(1);
        let reduced: Vec<u64> = weights.iter().map(|&w| w as u64 / g).collect();
        let total: u64 = reduced.iter().sum();
        if total * reduced.len() as u64 <= MAX_TABLE_WORK {
            return Schedule::Table(smooth_period(&reduced, total));
        }
        let mut stride = ((total as f64) * 0.618_033_988_75) as u64 | 1;
        while gcd(stride, total) != 1 {
            stride += 2;
        }
        let prefix = reduced
            .iter()
            .scan(0, |acc, w| {
                *acc += w;
                Some(*acc)
            })
            .collect();
        Schedule::Stride {
            prefix,
            total,
            stride,
        }
    }

    /// Length of one period.
    pub fn period(&self) -> u64 {
        match self {
            Schedule::Table(t) => t.len() as u64,
            Schedule::Stride { total, .. } => *total,
        }
    }

    /// Member position at step `k` of the (infinite, periodic) schedule.
    pub fn at(&self, k: u64) -> usize {
        match self {
            Schedule::Table(t) => t[(k % t.len() as u64) as usize] as usize,
            Schedule::Stride {
                prefix,
                total,
                stride,
            } => {
                let point = ((k % total) as u128 * *stride as u128 % *total as u128) as u64;
                prefix.partition_point(|&end| end <= point)
            }
        }
    }

    /// A member that `ok` accepts, drawing steps from `next` (a shared cursor).
    ///
    /// A refused step is skipped rather than handed to its neighbour, so the members that
    /// remain keep shares proportional to their weights. Concurrent callers draw from the
    /// same cursor, so after one period of draws the rest of the period is scanned in
    /// order: a member that can take the request is always found.
    pub fn pick(
        &self,
        mut next: impl FnMut() -> u64,
        mut ok: impl FnMut(usize) -> bool,
    ) -> Option<usize> {
        let mut k = 0;
        for _ in 0..self.period() {
            k = next();
            if ok(self.at(k)) {
                return Some(self.at(k));
            }
        }
        (1..self.period())
            .map(|i| self.at(k.wrapping_add(i)))
            .find(|&m| ok(m))
    }
}

/// One period of nginx's smooth weighted round robin.
fn smooth_period(weights: &[u64], total: u64) -> Box<[u32]> {
    let mut current = vec![0i64; weights.len()];
    (0..total)
        .map(|_| {
            let mut best = 0;
            for (i, w) in weights.iter().enumerate() {
                current[i] += *w as i64;
                if current[i] > current[best] {
                    best = i;
                }
            }
            current[best] -= total as i64;
            best as u32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(s: &Schedule, members: usize, picks: u64) -> Vec<u64> {
        let mut n = vec![0; members];
        for k in 0..picks {
            n[s.pick(|| k, |_| true).unwrap()] += 1;
        }
        n
    }

    #[test]
    fn smooth_period_interleaves_like_nginx() {
        // nginx's documented sequence for weights 5,1,1: a a b a c a a
        let s = Schedule::new(&[5, 1, 1]);
        let seq: Vec<usize> = (0..7).map(|k| s.at(k)).collect();
        assert_eq!(seq, [0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn both_forms_give_exact_shares_per_period() {
        let table = Schedule::new(&[1, 2, 4]);
        assert!(matches!(table, Schedule::Table(_)));
        assert_eq!(shares(&table, 3, 7_000), [1_000, 2_000, 4_000]);

        let big: Vec<u32> = (0..20_000).map(|i| 1 + (i % 1000)).collect();
        let stride = Schedule::new(&big);
        assert!(matches!(stride, Schedule::Stride { .. }));
        let total = stride.period();
        let n = shares(&stride, big.len(), total);
        for (i, w) in big.iter().enumerate() {
            assert_eq!(n[i], *w as u64, "member {i}");
        }
    }

    #[test]
    fn refused_members_keep_the_others_in_proportion() {
        // Weights 4:1:1 with the last member refusing: 4:1 exactly, not 5:1.
        let s = Schedule::new(&[4, 1, 1]);
        let mut cursor = 0u64;
        let mut n = [0u32; 3];
        for _ in 0..500 {
            let m = s
                .pick(
                    || {
                        cursor += 1;
                        cursor - 1
                    },
                    |m| m != 2,
                )
                .unwrap();
            n[m] += 1;
        }
        assert_eq!(n, [400, 100, 0]);
    }

    #[test]
    fn a_member_that_can_take_it_is_always_found() {
        let s = Schedule::new(&[1, 1, 2]);
        // A cursor that other callers keep advancing past the one usable member.
        let mut k = 0u64;
        let found = s.pick(
            || {
                k += 2;
                k
            },
            |m| m == 1,
        );
        assert_eq!(found, Some(1));
        assert_eq!(s.pick(|| 0, |_| false), None);
    }
}
