//! A tether a test leaves in the background does not outlive the test.

use std::path::PathBuf;
use std::process::Command;

/// Kills, when dropped, the process named in a pid file: a tether a test left in the
/// background (`tether upgrade` daemonizes the new process) does not outlive a failed test.
pub struct KillOnDrop(pub PathBuf);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(pid) = tether::process::upgrade::read_pid(&self.0) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}
