//! Health hints between instances: "I marked this server down".
//!
//! Health stays local: each instance sees the network from where it stands, and a server one
//! instance cannot reach may serve the others well. So a hint never marks a server down
//! here; it makes this instance's health checker check that server at its next tick instead
//! of waiting for the server's interval. Without health checks a hint is only logged.

use std::sync::Mutex;

#[derive(Default)]
pub struct Hints {
    /// Servers this instance's checks marked down, to publish.
    outbox: Mutex<Vec<(String, String)>>,
    /// Servers others marked down, for the health checker.
    inbox: Mutex<Vec<(String, String)>>,
}

fn take(q: &Mutex<Vec<(String, String)>>) -> Vec<(String, String)> {
    std::mem::take(&mut *q.lock().unwrap_or_else(|e| e.into_inner()))
}

fn push(q: &Mutex<Vec<(String, String)>>, cluster: &str, server: &str) {
    let mut q = q.lock().unwrap_or_else(|e| e.into_inner());
    // Bounded: a flapping fleet must not grow it while Redis is away.
    if q.len() < 1024 {
        q.push((cluster.to_string(), server.to_string()));
    }
}

impl Hints {
    /// This instance's health checks marked `cluster/server` down.
    pub fn marked_down(&self, cluster: &str, server: &str) {
        push(&self.outbox, cluster, server);
    }

    pub fn take_outbox(&self) -> Vec<(String, String)> {
        take(&self.outbox)
    }

    /// Another instance marked `cluster/server` down.
    pub fn received(&self, cluster: &str, server: &str) {
        push(&self.inbox, cluster, server);
    }

    /// Servers to check at once (the health checker's tick).
    pub fn take_inbox(&self) -> Vec<(String, String)> {
        take(&self.inbox)
    }
}
