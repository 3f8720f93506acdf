//! tether's routing as the plugins' [`SessionLens`]: where a request's session would go in
//! a cluster of the snapshot, and why, asked without claiming anything (a script's
//! `r:session()`).

use crate::routing::{now_ms, Decision, Reject};
use crate::state::snapshot::Snapshot;
use pingora_http::RequestHeader;
use tether_plugins::{SessionLens, SessionView};

impl SessionLens for Snapshot {
    fn cluster(&self, name: &str) -> Option<usize> {
        self.clusters.iter().position(|c| c.name == name)
    }

    fn session(&self, req: &RequestHeader, cluster: usize) -> Option<SessionView> {
        let router = self.clusters.get(cluster)?;
        let seen = router.explain(req.raw_path(), &req.headers, now_ms());
        let text = |b: Option<Vec<u8>>| b.map(|b| String::from_utf8_lossy(&b).into_owned());
        let (server, why) = match seen.decision {
            Decision::Route { server, outcome } => {
                let name = router.servers()[server].config.name.clone();
                (Some(name), outcome.as_str())
            }
            Decision::Reject(Reject::StickyForce) => (None, "sticky_force"),
            Decision::Reject(Reject::NoServer) => (None, "no_server"),
            Decision::Reject(Reject::Busy) => (None, "busy"),
        };
        Some(SessionView {
            cluster: router.name.clone(),
            id: text(seen.session_id),
            token: text(seen.token),
            server,
            why,
        })
    }
}
