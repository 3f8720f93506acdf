//! Loading the fleet's state before this instance listens.

use super::redis_io::{Failure, Fields, Redis};
use super::{apply, Fleet};
use crate::services::control::Control;
use std::collections::HashSet;
use std::sync::Arc;

/// Loads operators' changes and every WebSphere cluster's partition table from Redis into
/// this instance, waiting at most `startup_timeout`. When Redis cannot be reached, logs it
/// and returns: the instance starts with what `state_dir` gave it, and the sync task
/// catches up once Redis answers.
pub fn load_at_start(fleet: &Arc<Fleet>, control: &Control) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            log::warn!("fleet: cannot load the shared state at start: {e}");
            return;
        }
    };
    let s = &fleet.settings;
    let result = runtime.block_on(async {
        tokio::time::timeout(s.startup_timeout, load(fleet, control))
            .await
            .unwrap_or_else(|_| {
                Err(Failure::Link(format!(
                    "not done within startup_timeout ({:?})",
                    s.startup_timeout
                )))
            })
    });
    match result {
        Ok((servers, partitions)) => log::info!(
            "fleet: instance {} loaded {servers} server changes and {partitions} partitions from {}",
            fleet.instance(),
            s.url
        ),
        Err(e) => log::warn!(
            "fleet: {} is unreachable at start ({e}); starting from state_dir, syncing once it answers",
            s.url
        ),
    }
}

/// Everything Redis holds for this fleet; returns the changes and partitions applied.
pub(super) async fn load(fleet: &Fleet, control: &Control) -> Result<(usize, usize), Failure> {
    let mut redis = Redis::connect(&fleet.settings).await?;
    load_with(&mut redis, fleet, control)
        .await
        .map(|(s, p, _)| (s, p))
}

/// What Redis held when it was loaded: the server fields, and per WebSphere cluster the
/// partition keys.
#[derive(Default)]
pub(super) struct InRedis {
    pub servers: HashSet<Vec<u8>>,
    pub partitions: Vec<(String, HashSet<u64>)>,
}

/// [`load`] on an open connection; also returns what Redis held.
pub(super) async fn load_with(
    redis: &mut Redis,
    fleet: &Fleet,
    control: &Control,
) -> Result<(usize, usize, InRedis), Failure> {
    let mut held = InRedis::default();
    let mut servers = 0;
    for (f, v) in readable(redis.hash(&fleet.keys.servers()).await)? {
        let a = apply::server(fleet, control, &f, &v);
        held.servers.insert(f);
        a.count("server");
        servers += (a == apply::Applied::Changed) as usize;
    }
    let snapshot = control.snapshot().load_full();
    let mut partitions = 0;
    for router in snapshot.clusters.iter().filter(|r| r.is_websphere()) {
        let mut keys = HashSet::new();
        for (f, v) in readable(redis.hash(&fleet.keys.partitions(&router.name)).await)? {
            let a = apply::partition(fleet, router, &f, &v);
            a.count("partition");
            partitions += (a == apply::Applied::Changed) as usize;
            if let Some(k) = super::keys::parse_partition_field(&f) {
                keys.insert(k);
            }
        }
        held.partitions.push((router.name.clone(), keys));
    }
    Ok((servers, partitions, held))
}

/// A hash Redis refuses to read (a key of another type, say) is logged and skipped: the
/// rest of the fleet's state still loads.
fn readable(r: Result<Fields, Failure>) -> Result<Fields, Failure> {
    match r {
        Err(Failure::Data(e)) => {
            super::redis_io::data_error("a read", &e);
            Ok(Vec::new())
        }
        r => r,
    }
}
