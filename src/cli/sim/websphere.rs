//! A simulated WebSphere cluster member with memory-to-memory session replication:
//! partition IDs in `JSESSIONID`, `$WSPT` partition tables in responses, and `$WSFO`
//! failover requests that pull a session from the replica and take over its partition.

mod cluster;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub use cluster::WasCluster;

use super::server::{lock, Handler, Request, SimResponse, SimServer};
use super::session::{requested_ids, IdGen};

/// WebSphere's cache id, the first four characters of every session id.
const CACHE_ID: &str = "0000";
const KEY_CHARS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
const KEY_RANDOM_LEN: usize = 23;

/// A simulated WebSphere clone; clones of this handle share the same server.
#[derive(Clone)]
pub struct WebSphereSim {
    server: SimServer,
    app: Arc<WebSphere>,
}

/// WebSphere's session logic, plugged into the shared server machinery.
struct WebSphere {
    cluster: WasCluster,
    name: String,
    clone_id: String,
    /// This JVM's own copy: session key → count. Emptied when the server stops.
    local: Mutex<HashMap<String, u64>>,
    ids: IdGen,
    /// Round-robin position over owned partitions for new sessions.
    next_partition: AtomicUsize,
    wsfo_received: AtomicU64,
}

/// Outcome of one request for its session.
struct Touched {
    key: String,
    count: u64,
    /// The full id to send in Set-Cookie, only for a session created by this request.
    new_id: Option<String>,
}

impl WebSphereSim {
    /// Binds 127.0.0.1:0. `partitions` are the partition IDs this clone owns at start
    /// (e.g. ["7329011", "-184020"]); they are taken from any clone that owned them.
    pub async fn start(
        cluster: &WasCluster,
        name: &str,
        clone_id: &str,
        partitions: &[&str],
    ) -> io::Result<WebSphereSim> {
        for partition in partitions {
            cluster.assign(partition, clone_id);
        }
        let app = Arc::new(WebSphere {
            cluster: cluster.clone(),
            name: name.to_string(),
            clone_id: clone_id.to_string(),
            local: Mutex::default(),
            ids: IdGen::new(),
            next_partition: AtomicUsize::new(0),
            wsfo_received: AtomicU64::new(0),
        });
        let server = SimServer::start(app.clone())?;
        Ok(WebSphereSim { server, app })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    pub fn name(&self) -> &str {
        &self.app.name
    }

    pub fn clone_id(&self) -> &str {
        &self.app.clone_id
    }

    /// Stops accepting and closes every open connection, like a killed JVM; the local
    /// session copy dies with it. Partition ownership in the cluster is left as it is.
    pub async fn stop(&self) {
        self.server.stop().await;
        // After the connections are gone, so no in-flight request repopulates it.
        lock(&self.app.local).clear();
    }

    /// Starts again on the same port with an empty local copy; a no-op if already running.
    pub async fn restart(&self) -> io::Result<()> {
        self.server.restart()
    }

    pub fn is_running(&self) -> bool {
        self.server.is_running()
    }

    /// Total requests received (all paths except /health).
    pub fn requests(&self) -> u64 {
        self.server.requests()
    }

    /// Requests that arrived carrying `$WSFO`.
    pub fn wsfo_received(&self) -> u64 {
        self.app.wsfo_received.load(Ordering::SeqCst)
    }

    /// Partitions this clone currently owns.
    pub fn partitions(&self) -> Vec<String> {
        self.app.cluster.partitions_of(&self.app.clone_id)
    }

    /// Headers of the most recent request (all paths except /health), names lower-cased.
    pub fn last_request_headers(&self) -> Vec<(String, Vec<u8>)> {
        self.server.last_request_headers()
    }
}

impl Handler for WebSphere {
    fn handle(&self, req: &Request) -> SimResponse {
        let keys: Vec<String> = requested_ids(&req.path, &req.headers)
            .iter()
            .map(|id| session_key(id).to_string())
            .collect();
        // Header names arrive lower-cased; the value does not matter to WebSphere.
        let failover = req.headers.iter().any(|(name, _)| name == "$wsfo");
        let touched = if failover {
            self.wsfo_received.fetch_add(1, Ordering::SeqCst);
            self.fail_over(&keys)
        } else {
            self.sticky(&keys)
        };
        let Touched { key, count, new_id } = touched;
        let mut resp = SimResponse::ok(format!(
            "server={} session={key} count={count}\n",
            self.name
        ));
        if let Some(id) = new_id {
            resp = resp.header("Set-Cookie", format!("JSESSIONID={id}; Path=/; HttpOnly"));
        }
        // Read after the request, so a takeover is announced in the very response.
        let owned = self.cluster.partitions_of(&self.clone_id);
        if !owned.is_empty() {
            let table: Vec<String> = owned
                .iter()
                .map(|p| format!("{p}={}", self.clone_id))
                .collect();
            resp = resp.header("$WSPT", table.join(", "));
        }
        if failover {
            // Not WebSphere's: tells a client which of its requests carried `$WSFO`.
            resp = resp.header("X-Failover", "1");
        }
        resp.header("X-Server", &self.name)
            .header("X-Session-Id", &key)
            .header("X-Session-Count", count.to_string())
    }
}

impl WebSphere {
    /// Affinity held: the local copy counts. A session missing from it is served from the
    /// replica only when this clone owns the session's partition (it took the partition
    /// over); any other session this JVM never saw becomes a new one, which is how a
    /// missing `$WSFO` loses data.
    fn sticky(&self, keys: &[String]) -> Touched {
        let mut local = lock(&self.local);
        for key in keys {
            if let Some(count) = local.get_mut(key) {
                *count += 1;
                self.cluster.update(key, *count);
                return touched(key, *count);
            }
        }
        for key in keys {
            if let Some(count) = self.cluster.serve_owned(key, &self.clone_id) {
                local.insert(key.clone(), count);
                return touched(key, count);
            }
        }
        self.create(&mut local)
    }

    /// `$WSFO`: the local copy may be stale, so drop it and trust the replica, taking over
    /// the session's partition. Without a replica there is nothing to recover.
    fn fail_over(&self, keys: &[String]) -> Touched {
        let mut local = lock(&self.local);
        for key in keys {
            local.remove(key);
            if let Some(count) = self.cluster.take_over(key, &self.clone_id) {
                local.insert(key.clone(), count);
                return touched(key, count);
            }
        }
        self.create(&mut local)
    }

    fn create(&self, local: &mut HashMap<String, u64>) -> Touched {
        let key = random_key(&self.ids);
        let owned = self.cluster.partitions_of(&self.clone_id);
        let partition = match owned.len() {
            0 => None,
            n => Some(&owned[self.next_partition.fetch_add(1, Ordering::Relaxed) % n]),
        };
        // WebSphere falls back to the clone id when there is no partition to name.
        let token = partition.map_or(self.clone_id.as_str(), String::as_str);
        local.insert(key.clone(), 1);
        self.cluster.create(&key, partition.map(String::as_str));
        Touched {
            new_id: Some(format!("{key}:{token}")),
            key,
            count: 1,
        }
    }
}

fn touched(key: &str, count: u64) -> Touched {
    Touched {
        key: key.to_string(),
        count,
        new_id: None,
    }
}

/// The session key is everything before the first `:`; later tokens name clones/partitions.
fn session_key(id: &str) -> &str {
    id.split(':').next().unwrap_or_default()
}

/// `0000` followed by 23 characters from WebSphere's id alphabet.
fn random_key(ids: &IdGen) -> String {
    let mut key = String::from(CACHE_ID);
    let (mut bits, mut left) = (0u64, 0);
    for _ in 0..KEY_RANDOM_LEN {
        // Each u64 yields ten 6-bit characters.
        if left == 0 {
            (bits, left) = (ids.next_u64(), 10);
        }
        key.push(KEY_CHARS[(bits & 63) as usize] as char);
        bits >>= 6;
        left -= 1;
    }
    key
}
