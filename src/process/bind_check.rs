//! Before Pingora binds: every address tether will listen on must be free, or tether exits
//! with one line naming it (Pingora would retry for a while, then panic in a thread and
//! keep running without that listener).

use crate::config::Config;
use std::net::{SocketAddr, TcpListener};

/// Every address the config listens on, with what it is for.
pub fn addresses(config: &Config) -> Vec<(String, SocketAddr)> {
    let mut out: Vec<(String, SocketAddr)> = config
        .listeners
        .iter()
        .map(|l| (format!("listener {}", l.name), l.address))
        .collect();
    if let Some(a) = &config.admin {
        out.push(("the admin API".into(), a.address));
    }
    if let Some(m) = &config.metrics {
        out.push(("the metrics listener".into(), m.address));
    }
    out
}

/// Binds each address once and lets it go; the first that cannot be bound is the error.
pub fn check(config: &Config) -> Result<(), String> {
    check_addresses(&addresses(config), |_| false)
}

/// As [`check`], skipping addresses for which `taken_over` is true (sockets a running
/// tether hands to its successor in an upgrade).
pub fn check_addresses(
    addresses: &[(String, SocketAddr)],
    taken_over: impl Fn(SocketAddr) -> bool,
) -> Result<(), String> {
    for (what, addr) in addresses {
        if taken_over(*addr) {
            continue;
        }
        if let Err(e) = TcpListener::bind(addr) {
            return Err(format!("cannot listen on {addr} ({what}): {e}"));
        }
    }
    Ok(())
}

/// The TCP addresses process `pid` is listening on (from `/proc`), for an upgrade: those
/// sockets are handed over, so they are not "in use" for the new process.
pub fn listening_of(pid: i32) -> Vec<SocketAddr> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for (file, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address, st (0A = LISTEN), inode
            if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                if let Some(a) = parse_proc_addr(f[1], v6) {
                    out.push(a);
                }
            }
        }
    }
    out
}

/// `0100007F:1F90` (IPv4) or 32 hex digits + port (IPv6), as `/proc/net/tcp*` writes them.
fn parse_proc_addr(text: &str, v6: bool) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    if !v6 {
        let n = u32::from_str_radix(ip, 16).ok()?;
        return Some(SocketAddr::from((n.to_le_bytes(), port)));
    }
    if ip.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, word) in ip.as_bytes().chunks(8).enumerate() {
        let w = u32::from_str_radix(std::str::from_utf8(word).ok()?, 16).ok()?;
        bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    Some(SocketAddr::from((bytes, port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_in_use_is_named() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap();
        let list = vec![("listener web".to_string(), addr)];
        let e = check_addresses(&list, |_| false).unwrap_err();
        assert!(
            e.contains(&addr.to_string()) && e.contains("listener web"),
            "{e}"
        );
        // Handed over by the running process in an upgrade: not an error.
        assert!(check_addresses(&list, |a| a == addr).is_ok());
        // And this process is seen listening on it.
        assert!(listening_of(std::process::id() as i32).contains(&addr));
        drop(held);
        // A free address passes. A port just released can be taken at once by another
        // test's outgoing connection (CI saw it), so a free one is looked for a few times:
        // a check that refused every free address would still fail all of them.
        let mut last = String::new();
        let passed = (0..5).any(|_| {
            let addr = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .unwrap();
            let list = vec![("listener web".to_string(), addr)];
            check_addresses(&list, |_| false)
                .map_err(|e| last = e)
                .is_ok()
        });
        assert!(passed, "a free address was refused: {last}");
    }

    #[test]
    fn proc_addresses() {
        assert_eq!(
            parse_proc_addr("0100007F:1F90", false),
            Some("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(
            parse_proc_addr("00000000000000000000000001000000:0050", true),
            Some("[::1]:80".parse().unwrap())
        );
    }
}
