//! Host names in a config, looked up once when it loads, or never in a process that asked
//! so (the fuzz targets, which must send nothing off the machine).

use std::cell::Cell;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

static NO_LOOKUPS: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while [`without_name_lookups`] runs its closure on this thread.
    static NO_LOOKUPS_HERE: Cell<bool> = const { Cell::new(false) };
}

/// From now on a host name in a config is an error ending in [`NOT_LOOKED_UP`] instead of
/// a DNS query.
pub fn no_name_lookups() {
    NO_LOOKUPS.store(true, Relaxed);
}

/// Runs `f` with host names in a config answered by an error ending in [`NOT_LOOKED_UP`]
/// on this thread (an importer checking the config it wrote: it must not send DNS queries
/// for the hosts of a file it only converts).
pub fn without_name_lookups<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            NO_LOOKUPS_HERE.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(NO_LOOKUPS_HERE.with(|c| c.replace(true)));
    f()
}

/// The end of the error for a host name after [`no_name_lookups`].
pub const NOT_LOOKED_UP: &str = "names a host, which is not looked up here";

/// The first address of `host_port` (`host:port`); errors name it as `shown`.
pub fn resolve(host_port: &str, shown: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = host_port.parse::<SocketAddr>() {
        return Ok(a);
    }
    if NO_LOOKUPS.load(Relaxed) || NO_LOOKUPS_HERE.with(Cell::get) {
        return Err(format!("`{shown}` {NOT_LOOKED_UP}"));
    }
    host_port
        .to_socket_addrs()
        .map_err(|e| format!("`{shown}` does not resolve: {e}"))?
        .next()
        .ok_or_else(|| format!("`{shown}` does not resolve to any address"))
}
