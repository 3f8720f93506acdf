//! Stable hashes of WebSphere partition and clone ids: written to state files and Redis and
//! compared across instances, so they never change. The config checks that a cluster's
//! clone ids have distinct tags; the routing tables key on them.

/// FNV-1a then a 64-bit finaliser (murmur3's), never 0. Stable: it is persisted.
pub fn partition_key(partition: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in partition {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h.max(1)
}

/// A 32-bit tag for a clone id, never 0. Clone ids of one cluster must have distinct tags
/// (config validation checks it).
pub fn clone_tag(clone_id: &[u8]) -> u32 {
    let h = partition_key(clone_id);
    ((h >> 32) as u32 ^ h as u32).max(1)
}
