//! Host names in a config, looked up once when it loads, or never in a process that asked
//! so (the fuzz targets, which must send nothing off the machine).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

static NO_LOOKUPS: AtomicBool = AtomicBool::new(false);

/// From now on a host name in a config is an error ending in [`NOT_LOOKED_UP`] instead of
/// a DNS query.
pub fn no_name_lookups() {
    NO_LOOKUPS.store(true, Relaxed);
}

/// The end of the error for a host name after [`no_name_lookups`].
pub const NOT_LOOKED_UP: &str = "names a host, which is not looked up here";

/// The first address of `host_port` (`host:port`); errors name it as `shown`.
pub fn resolve(host_port: &str, shown: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = host_port.parse::<SocketAddr>() {
        return Ok(a);
    }
    if NO_LOOKUPS.load(Relaxed) {
        return Err(format!("`{shown}` {NOT_LOOKED_UP}"));
    }
    host_port
        .to_socket_addrs()
        .map_err(|e| format!("`{shown}` does not resolve: {e}"))?
        .next()
        .ok_or_else(|| format!("`{shown}` does not resolve to any address"))
}
