//! A Tomcat-like application server: sticky `JSESSIONID` sessions tagged with a jvmRoute,
//! and a stop/restart switch that behaves like killing and relaunching the JVM.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

use super::server::{lock, Handler, Request, SimResponse, SimServer};
use super::session::{requested_ids, IdGen};

/// A simulated application server; clones share the same server.
#[derive(Clone)]
pub struct TomcatSim {
    server: SimServer,
    app: Arc<Tomcat>,
}

/// Tomcat's session logic, plugged into the shared server machinery.
struct Tomcat {
    name: String,
    route: String,
    /// Session id → number of requests seen in that session. Outlives stop/restart.
    sessions: Mutex<HashMap<String, u64>>,
    ids: IdGen,
    /// When non-zero, every request (but `/health`) is answered with this status and no
    /// session work, like an application that is deploying or failing.
    status: AtomicU16,
}

impl TomcatSim {
    /// Binds 127.0.0.1:0 and starts serving on the current tokio runtime.
    pub async fn start(name: &str, jvm_route: &str) -> io::Result<TomcatSim> {
        let app = Arc::new(Tomcat {
            name: name.to_string(),
            route: jvm_route.to_string(),
            sessions: Mutex::default(),
            ids: IdGen::new(),
            status: AtomicU16::new(0),
        });
        let server = SimServer::start(app.clone())?;
        Ok(TomcatSim { server, app })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    pub fn name(&self) -> &str {
        &self.app.name
    }

    pub fn route(&self) -> &str {
        &self.app.route
    }

    /// Stops accepting and closes every open connection (like a killed JVM); returns once
    /// the port is closed. Sessions are kept for a later `restart`.
    pub async fn stop(&self) {
        self.server.stop().await;
    }

    /// Starts again on the same port with the same sessions; a no-op if already running.
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

    /// Total TCP connections accepted, so tests can tell whether connections were reused.
    pub fn connections(&self) -> u64 {
        self.server.connections()
    }

    /// Makes the application answer every request with `status` (0: back to normal).
    pub fn set_status(&self, status: u16) {
        self.app.status.store(status, Ordering::Relaxed);
    }

    /// Number of sessions this server holds.
    pub fn session_count(&self) -> usize {
        lock(&self.app.sessions).len()
    }

    /// TCP connections open now (each one would hold a Tomcat thread).
    pub fn open_connections(&self) -> u64 {
        self.server.open_connections()
    }

    /// Headers of the most recent request (all paths except /health), names lower-cased.
    pub fn last_request_headers(&self) -> Vec<(String, Vec<u8>)> {
        self.server.last_request_headers()
    }
}

impl Handler for Tomcat {
    fn handle(&self, req: &Request) -> SimResponse {
        let status = self.status.load(Ordering::Relaxed);
        if status != 0 {
            let mut resp = SimResponse::ok(format!("server={} status={status}\n", self.name));
            resp.status = status;
            return resp.header("X-Server", &self.name);
        }
        // `/bytes/N`: a body of N bytes (at most 64 MiB), for large responses.
        if let Some(n) = req.path.strip_prefix("/bytes/") {
            let n = n.parse::<usize>().unwrap_or(0).min(64 << 20);
            return SimResponse::ok(vec![b'x'; n]).header("X-Server", &self.name);
        }
        let (id, count) = self.touch_session(&requested_ids(&req.path, &req.headers));
        let mut resp =
            SimResponse::ok(format!("server={} session={id} count={count}\n", self.name));
        if count == 1 {
            resp = resp.header("Set-Cookie", format!("JSESSIONID={id}; Path=/; HttpOnly"));
        }
        resp.header("X-Server", &self.name)
            .header("X-Session-Id", &id)
            .header("X-Session-Count", count.to_string())
    }
}

impl Tomcat {
    /// Counts a request in the first requested session we hold, or in a brand-new one.
    fn touch_session(&self, requested: &[String]) -> (String, u64) {
        let mut sessions = lock(&self.sessions);
        for id in requested {
            if let Some(count) = sessions.get_mut(id) {
                *count += 1;
                return (id.clone(), *count);
            }
        }
        let id = self.ids.session_id(&self.route);
        sessions.insert(id.clone(), 1);
        (id, 1)
    }
}
