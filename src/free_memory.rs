//! Returns the memory tether frees to the system on time, as jemalloc's decay schedule says
//! (`dirty_decay_ms`, 10 s): jemalloc's background thread, and a decay pass of every arena
//! each second. A background service, so both start after daemonizing (a `fork` turns
//! jemalloc's background threads off in the child). For the binary, whose allocator is
//! jemalloc.
//!
//! Without the thread, memory is returned only while requests come: 10,000 connections
//! that went idle held 12.4 KiB each of resident memory instead of about 6 KiB. The thread
//! alone (started at run time) had not returned a burst of frees 11 s later: the buffers
//! of the connections that waited for their next request (`engine/grace.rs`, 6 MiB at two
//! threads), freed together a second after their requests (+0.7 KiB per connection at
//! 10,000 idle connections; `bench/run`'s memory figures). With the pass, all were back
//! 13 s after the connections opened.

use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::time::Duration;

/// The background service.
pub struct ReturnFreedMemory;

/// `arena.<MALLCTL_ARENAS_ALL>.decay`: purges, in every arena, the freed pages whose time
/// on the decay curve has come.
const DECAY_ALL: &[u8] = b"arena.4096.decay\0";

fn decay() -> bool {
    // SAFETY: a NUL-terminated name of a jemalloc control that takes and returns nothing
    // (jemalloc's manual, "MALLCTL NAMESPACE"), called with no buffers.
    let r = unsafe {
        tikv_jemalloc_sys::mallctl(
            DECAY_ALL.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    r == 0
}

#[async_trait::async_trait]
impl BackgroundService for ReturnFreedMemory {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let one = tikv_jemalloc_ctl::max_background_threads::write(1);
        if let Err(e) = one.and_then(|()| tikv_jemalloc_ctl::background_thread::write(true)) {
            log::warn!("jemalloc's background thread did not start ({e}): freed memory is returned to the system only while requests come and each second");
        }
        if !decay() {
            log::warn!("jemalloc's decay pass is not available: freed memory is returned to the system on its background thread's schedule");
            return;
        }
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    decay();
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_decay_pass_is_one_jemalloc_knows() {
        // A name jemalloc did not know would leave only the background thread, silently
        // but for one warning.
        assert!(super::decay());
    }
}
