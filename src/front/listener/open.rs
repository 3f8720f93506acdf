//! The count of client connections open in the process, on every listener and every
//! protocol: a graceful stop ends once none is left (`process/fast_stop.rs`).

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

static OPEN_IN_PROCESS: AtomicUsize = AtomicUsize::new(0);

/// How many client connections are open, on every listener (requests in flight, upgraded
/// connections, connections waiting for their next request, QUIC connections).
pub fn open_connections() -> usize {
    OPEN_IN_PROCESS.load(Relaxed)
}

/// A client connection counted among the process's open connections until it is dropped.
pub struct OpenInProcess(());

impl OpenInProcess {
    pub fn count() -> OpenInProcess {
        OPEN_IN_PROCESS.fetch_add(1, Relaxed);
        OpenInProcess(())
    }
}

impl Drop for OpenInProcess {
    fn drop(&mut self) {
        OPEN_IN_PROCESS.fetch_sub(1, Relaxed);
    }
}
