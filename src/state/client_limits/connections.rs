//! Open connections per client, in memory fixed at creation: pingora-limits' count-min
//! `Estimator`, counted up when a connection opens and down when it closes, so what it
//! holds is bounded by the open connections (at most the listener's `max_connections`),
//! not by the clients ever seen. It is sized from `max_connections` (4 rows of twice as
//! many cells, rounded up: 64 to 128 bytes per connection, 1 MiB for the default 10,000). It
//! never undercounts; how much it over-counts a client when the listener is full is
//! measured in `tests` below and stated in DESIGN section 9.

use pingora_limits::estimator::Estimator;
use std::sync::Arc;

const ROWS: usize = 4;
/// The fewest cells per row.
const FEWEST: usize = 1 << 10;

pub struct Connections(Estimator, usize);

/// One counted connection: counted down when dropped (however the connection ends).
pub struct Open {
    counts: Arc<Connections>,
    key: u128,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.counts.0.decr(self.key, 1);
    }
}

impl Connections {
    /// Counts sized for `most` open connections (the listener's `max_connections`): twice
    /// as many cells per row, rounded up to a power of two, 64 bytes per connection.
    pub fn new(most: usize) -> Self {
        let slots = Connections::slots_for(most);
        Connections(Estimator::new(ROWS, slots), slots)
    }

    /// The cells per row of counts sized for `most` open connections.
    pub fn slots_for(most: usize) -> usize {
        (most * 2).next_power_of_two().max(FEWEST)
    }

    /// The connections it is sized for (cells per row).
    pub fn slots(&self) -> usize {
        self.1
    }

    /// Counts a new connection of `key` when it keeps the client within `limit`.
    pub fn open(self: &Arc<Self>, key: u128, limit: u32) -> Option<Open> {
        let open = self.0.incr(key, 1);
        let counted = Open {
            counts: self.clone(),
            key,
        };
        (open <= limit as isize).then_some(counted)
    }

    #[cfg(test)]
    pub fn count(&self, key: u128) -> isize {
        self.0.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_count_down_as_they_close() {
        let c = Arc::new(Connections::new(10));
        let a: Vec<Open> = (0..3).filter_map(|_| c.open(1, 3)).collect();
        assert_eq!(a.len(), 3);
        assert!(c.open(1, 3).is_none(), "a fourth is over the limit");
        assert!(c.open(2, 3).is_some(), "another client is not");
        assert_eq!(c.count(1), 3, "a refused connection is not left counted");
        drop(a);
        assert_eq!(c.count(1), 0);
        assert!(c.open(1, 3).is_some());
    }

    /// A listener full (`max_connections: 100000`, 100,000 clients with one connection
    /// each, `connections: 1`): how many clients are refused their one connection by
    /// collisions, and how many connections a client that holds none is charged with.
    #[test]
    fn a_full_listener_costs_others_little() {
        let c = Arc::new(Connections::new(100_000));
        let held: Vec<Open> = (0..100_000u128).filter_map(|k| c.open(k, 1)).collect();
        let refused = 100_000 - held.len();
        let mut over: Vec<isize> = (1 << 64..(1 << 64) + 100_000u128)
            .map(|k| c.count(k))
            .collect();
        over.sort_unstable();
        let p = |q: f64| over[((over.len() - 1) as f64 * q) as usize];
        println!(
            "100,000 clients, one connection each, {} MiB: {refused} refused; an idle \
             client's count, median {}, p99 {}, p99.9 {}, max {}",
            (ROWS * c.slots() * 8) >> 20,
            p(0.5),
            p(0.99),
            p(0.999),
            p(1.0)
        );
        assert!(refused <= 1_000, "{refused} of 100,000 refused");
        assert!(p(0.99) <= 1, "p99 over-count {}", p(0.99));
    }
}
