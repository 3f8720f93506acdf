//! `tether upgrade` of a tether under systemd: the running process starts the new binary
//! itself, inside the service (`successor.rs`), when asked with `SIGUSR2`; this command then
//! sends `SIGQUIT` as outside systemd and waits for the new process, which told systemd it is
//! the service's main process. What it can know of the service comes from /proc: whether
//! the running process handles `SIGUSR2`, its cgroup (the unit) and its children.

use super::{alive, fresh_socket, holds, read_pid, signal};
use crate::config;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// Whether the running tether `pid` starts its successor itself: it handles `SIGUSR2` (under
/// systemd only; to any other process the signal would be fatal).
pub(super) fn starts_its_successor(pid: i32) -> bool {
    crate::process::systemd::catches(pid, libc::SIGUSR2)
}

/// The unit the running tether `pid` runs in, when this process is not in it: a new process
/// started here would run outside the service, unsupervised, and systemd would end the
/// service when the old one exits. (From inside, e.g. a `Type=forking` unit's
/// `ExecReload=`, systemd follows the pid file.)
pub(super) fn outside_its_service(pid: i32) -> Option<String> {
    unit_of(pid).filter(|_| !same_cgroup(pid))
}

/// The systemd unit process `pid` runs in (`tether.service`), from its cgroup.
fn unit_of(pid: i32) -> Option<String> {
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    unit_in(&cgroup).map(str::to_string)
}

/// The service a `/proc/PID/cgroup` text names (cgroup v2's line, or v1's `name=systemd`).
fn unit_in(cgroup: &str) -> Option<&str> {
    cgroup
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .find(|unit| unit.ends_with(".service"))
}

/// The running processes `pid` started (each of its threads' `children`, from /proc; an
/// exited one not yet reaped is left out).
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|stat| {
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                !state.starts_with('Z')
            })
        })
        .collect()
}

/// Whether this process runs in process `pid`'s cgroups (the same service).
fn same_cgroup(pid: i32) -> bool {
    let of = |p: &str| std::fs::read_to_string(format!("/proc/{p}/cgroup")).ok();
    of("self").is_some_and(|own| Some(own) == of(&pid.to_string()))
}

/// The upgrade of a tether under systemd (`successor.rs`): the running process starts the
/// new binary, from its own path, inside the service; this command then sends `SIGQUIT` and
/// waits until the new process, which told systemd it is the service's main process, listens
/// on every address.
pub(super) fn upgrade(
    config: &config::Config,
    old: i32,
    binary: Option<PathBuf>,
    addresses: &[SocketAddr],
) -> Result<String, String> {
    let unit = unit_of(old).unwrap_or_else(|| "tether".into());
    // The path it was started from (under systemd, ExecStart='s), which it starts again.
    let own = std::fs::read(format!("/proc/{old}/cmdline"))
        .ok()
        .and_then(|c| {
            let arg0 = String::from_utf8_lossy(c.split(|b| *b == 0).next()?).into_owned();
            arg0.starts_with('/').then_some(arg0)
        })
        .unwrap_or_else(|| "the path it was started from".into());
    if let Some(b) = binary {
        return Err(format!(
            "pid {old} runs under systemd and starts the new binary from {own}: install {} \
             there and run `tether upgrade` without --binary; nothing was changed",
            b.display()
        ));
    }
    let sock = PathBuf::from(&config.server.upgrade_sock);
    let pid_file = PathBuf::from(&config.server.pid_file);
    let started = SystemTime::now() - Duration::from_secs(1);
    signal(old, libc::SIGUSR2)?;
    // 1. The new process, started by the old one, is listening on the upgrade socket.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut started_by_old = Vec::new();
    while !fresh_socket(&sock, started) {
        match children_of(old) {
            now if !now.is_empty() => started_by_old = now,
            _ if !started_by_old.is_empty() => {
                return Err(format!(
                    "the new process ({own} -u, pid {}) exited before it took over (why: \
                     journalctl -u {unit}); pid {old} keeps serving",
                    started_by_old[0]
                ))
            }
            _ => {}
        }
        if Instant::now() > deadline {
            return Err(format!(
                "pid {old} did not start {own} -u, or it never opened {} (why: journalctl -u \
                 {unit}); pid {old} keeps serving",
                sock.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let now = children_of(old);
    if !now.is_empty() {
        started_by_old = now;
    }
    // 2. The old process hands its sockets over and drains.
    signal(old, libc::SIGQUIT)?;
    // 3. The new process wrote its pid and listens on every address.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut gone_since = None;
    let new = loop {
        let new = read_pid(&pid_file).ok().filter(|p| *p != old && alive(*p));
        if let Some(new) = new {
            let held = crate::process::bind_check::listening_of(new);
            if addresses.iter().all(|a| holds(&held, *a)) {
                break new;
            }
        }
        // With -d its first process ends once the daemon wrote the pid file: a moment late.
        if !started_by_old.is_empty()
            && !children_of(old).iter().any(|p| started_by_old.contains(p))
        {
            let since = *gone_since.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_secs(2) && new.is_none() {
                return Err(format!(
                    "the new process exited after pid {old} handed it the listening sockets \
                     (why: journalctl -u {unit}); the service stops with it or once pid {old} \
                     drained: check `systemctl status {unit}`, start it with `systemctl \
                     restart {unit}`"
                ));
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the new process did not take over in 60 s (why: journalctl -u {unit})"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Ok(format!(
        "upgraded: pid {new} now serves, as {unit}'s main process (systemctl show -p MainPID \
         {unit}); pid {old} drains for up to {} s and exits",
        config.server.grace_period_seconds + config.server.graceful_shutdown_timeout_seconds
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn nothing(_: libc::c_int) {}

    #[test]
    fn a_handled_signal_is_seen_in_proc() {
        let me = std::process::id() as i32;
        assert!(!crate::process::systemd::catches(me, libc::SIGWINCH));
        // SAFETY: a handler that does nothing, for a signal no other unit test uses.
        unsafe {
            libc::signal(libc::SIGUSR2, nothing as *const () as libc::sighandler_t);
        }
        assert!(crate::process::systemd::catches(me, libc::SIGUSR2));
        assert!(same_cgroup(me));
    }

    #[test]
    fn the_unit_from_the_cgroup() {
        assert_eq!(
            unit_in("0::/system.slice/tether.service\n"),
            Some("tether.service")
        );
        assert_eq!(
            unit_in("12:pids:/system.slice\n1:name=systemd:/system.slice/tether.service\n"),
            Some("tether.service")
        );
        assert_eq!(
            unit_in("0::/user.slice/user-1000.slice/session-3.scope\n"),
            None
        );
        assert_eq!(unit_in("0::/\n"), None);
    }
}
