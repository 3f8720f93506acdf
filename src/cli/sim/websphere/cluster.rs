//! What a simulated WebSphere cluster shares between its members: the replicated session
//! store (memory-to-memory replication) and which clone owns which partition.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::cli::sim::server::lock;

/// State shared by the simulated cluster: the replicated session store and partition ownership.
#[derive(Clone, Default)]
pub struct WasCluster {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Partition → owner clone id. A list rather than a map so `$WSPT` lists partitions in
    /// a stable order: a clone's own partitions first, then those it took over, in turn.
    owners: Vec<(String, String)>,
    /// Session key → replica. Lives in the cluster, so it survives any member's restart.
    replicas: HashMap<String, Replica>,
}

struct Replica {
    count: u64,
    /// `None` when the session was created by a clone that owned no partition (its id
    /// carries the clone id instead), so there is no partition to take over.
    partition: Option<String>,
}

impl WasCluster {
    pub fn new() -> WasCluster {
        WasCluster::default()
    }

    /// Owner clone id of a partition, as the cluster currently sees it.
    pub fn owner(&self, partition: &str) -> Option<String> {
        let state = lock(&self.state);
        let (_, owner) = state.owners.iter().find(|(p, _)| p == partition)?;
        Some(owner.clone())
    }

    /// Partitions `clone_id` owns, in `$WSPT` order.
    pub(crate) fn partitions_of(&self, clone_id: &str) -> Vec<String> {
        let state = lock(&self.state);
        let owned = state.owners.iter().filter(|(_, owner)| owner == clone_id);
        owned.map(|(p, _)| p.clone()).collect()
    }

    /// Makes `clone_id` the owner of `partition`, taking it from whoever had it.
    pub(crate) fn assign(&self, partition: &str, clone_id: &str) {
        assign(&mut lock(&self.state), partition, clone_id);
    }

    /// Replicates a brand-new session (count 1).
    pub(crate) fn create(&self, key: &str, partition: Option<&str>) {
        let replica = Replica {
            count: 1,
            partition: partition.map(str::to_string),
        };
        lock(&self.state).replicas.insert(key.to_string(), replica);
    }

    /// Replicates a write of an existing session; synchronous, like WAS's
    /// "end of service" write frequency.
    pub(crate) fn update(&self, key: &str, count: u64) {
        let mut state = lock(&self.state);
        let replica = state.replicas.entry(key.to_string()).or_insert(Replica {
            count,
            partition: None,
        });
        replica.count = count;
    }

    /// A session this clone does not hold locally but whose partition it owns (it took
    /// the partition over): served from the replica, as its owner. `None` otherwise.
    pub(crate) fn serve_owned(&self, key: &str, clone_id: &str) -> Option<u64> {
        let mut state = lock(&self.state);
        let partition = state.replicas.get(key)?.partition.clone()?;
        let owned = state
            .owners
            .iter()
            .any(|(p, o)| *p == partition && o == clone_id);
        if !owned {
            return None;
        }
        let replica = state.replicas.get_mut(key)?;
        replica.count += 1;
        Some(replica.count)
    }

    /// Failover of one session to `clone_id`: counts the request in the replica and moves
    /// the session's partition to `clone_id`. `None` if the replica never saw the session.
    /// One lock for both, so two clones failing over at once cannot split the outcome.
    pub(crate) fn take_over(&self, key: &str, clone_id: &str) -> Option<u64> {
        let mut state = lock(&self.state);
        let replica = state.replicas.get_mut(key)?;
        replica.count += 1;
        let (count, partition) = (replica.count, replica.partition.clone());
        if let Some(partition) = partition {
            assign(&mut state, &partition, clone_id);
        }
        Some(count)
    }
}

fn assign(state: &mut State, partition: &str, clone_id: &str) {
    // Re-taking a partition one already owns must not reorder that clone's `$WSPT`.
    if state
        .owners
        .iter()
        .any(|(p, o)| p == partition && o == clone_id)
    {
        return;
    }
    state.owners.retain(|(p, _)| p != partition);
    state
        .owners
        .push((partition.to_string(), clone_id.to_string()));
}
