//! Returns the memory tether frees to the system on time: freed pages go back after about a
//! second (tether sets `dirty_decay_ms` to 1 s; jemalloc's default is 10 s), by jemalloc's
//! background thread and a decay pass of every arena each second. A background service, so both start after
//! daemonizing (a `fork` turns jemalloc's background threads off in the child). For the
//! binary, whose allocator is jemalloc.
//!
//! Without the thread, memory is returned only while requests come: connections that went
//! idle kept about twice the resident memory they needed. The thread alone (started at run
//! time) does not return a burst of frees for many seconds: the buffers of the connections
//! that waited for their next request (`front/engine/grace.rs`), freed together a second after
//! their requests. The pass returns them; with a 1-s decay, pages freed while a burst of
//! connections opened are not kept either (`bench/run`'s memory figures measure it).
//!
//! A shorter decay costs a page fault when a returned page is used again; tether's requests
//! allocate nothing in the steady state (`front/engine/conn.rs`), and the purge runs on the
//! background thread, not a request's.

use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::time::Duration;
use tikv_jemalloc_ctl::{arenas, raw};

/// The background service.
pub struct ReturnFreedMemory;

/// How long jemalloc keeps freed pages before it returns them, in ms.
const DIRTY_DECAY_MS: isize = 1000;

/// Sets jemalloc's decay time (`dirty_decay_ms`) of the arenas made from now on, and of
/// each made already; false when jemalloc does not take it.
fn set_dirty_decay(ms: isize) -> bool {
    // SAFETY: `arenas.dirty_decay_ms` and `arena.<i>.dirty_decay_ms` are `ssize_t`
    // (jemalloc's manual, "MALLCTL NAMESPACE").
    if unsafe { raw::write(b"arenas.dirty_decay_ms\0", ms) }.is_err() {
        return false;
    }
    let mut mib = [0usize; 3];
    let (Ok(n), Ok(())) = (
        arenas::narenas::read(),
        raw::name_to_mib(b"arena.0.dirty_decay_ms\0", &mut mib),
    ) else {
        return false;
    };
    for arena in 0..n as usize {
        mib[1] = arena;
        // An arena no thread has used yet is not made: it takes the default set above.
        // SAFETY: as above.
        let _ = unsafe { raw::write_mib(&mib, ms) };
    }
    true
}

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
        if !set_dirty_decay(DIRTY_DECAY_MS) {
            log::warn!("jemalloc's decay time could not be set: freed memory is returned to the system after its default 10 s");
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
    use super::*;
    use std::time::Instant;
    use tikv_jemalloc_ctl::epoch;

    #[test]
    fn the_decay_pass_is_one_jemalloc_knows() {
        // A name jemalloc did not know would leave only the background thread, silently
        // but for one warning.
        assert!(decay());
    }

    /// Bytes of freed pages jemalloc holds, in all arenas.
    fn dirty() -> usize {
        epoch::advance().unwrap();
        // SAFETY: both are `size_t` statistics (jemalloc's manual).
        let pages: usize = unsafe { raw::read(b"stats.arenas.4096.pdirty\0") }.unwrap();
        pages * unsafe { raw::read::<usize>(b"arenas.page\0") }.unwrap()
    }

    #[test]
    fn memory_freed_in_a_burst_goes_back_within_seconds_not_ten() {
        assert!(set_dirty_decay(DIRTY_DECAY_MS));
        // SAFETY: as in `set_dirty_decay`.
        let ms: isize = unsafe { raw::read(b"arena.0.dirty_decay_ms\0") }.unwrap();
        assert_eq!(ms, DIRTY_DECAY_MS);
        // 32 MiB in pieces past jemalloc's thread cache, each page written, then freed.
        const PIECE: usize = 256 * 1024;
        let before = dirty();
        let pieces: Vec<*mut u8> = (0..128)
            .map(|_| {
                // SAFETY: jemalloc's own malloc and free, each piece written within its
                // size and freed once.
                let p = unsafe { tikv_jemalloc_sys::malloc(PIECE) }.cast::<u8>();
                assert!(!p.is_null());
                unsafe { p.write_bytes(1, PIECE) };
                p
            })
            .collect();
        for p in pieces {
            // SAFETY: each piece from jemalloc's malloc above, freed once.
            unsafe { tikv_jemalloc_sys::free(p.cast()) };
        }
        assert!(
            dirty() >= before + (16 << 20),
            "the freed pieces are dirty pages at first"
        );
        // With jemalloc's 10-s decay, about four fifths are still held after 3 s.
        let start = Instant::now();
        while dirty() > before + (4 << 20) {
            assert!(
                start.elapsed() < Duration::from_secs(3),
                "{} MiB of freed pages held after 3 s",
                dirty().saturating_sub(before) >> 20
            );
            decay();
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
