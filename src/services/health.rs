//! Active health checks (DESIGN section 4): TCP or HTTP checks from `pingora-load-balancing`,
//! or an AJP CPing (`health/cping.rs`),
//! run by one background service, with rise/fall thresholds, feeding each server's health.
//!
//! The service reads the current routing snapshot every tick, so servers added or removed
//! by a reload are checked (or dropped) without restarting anything. Each server is checked
//! when its interval is due; all due checks of a tick run concurrently, each bounded by the
//! cluster's timeout. A transition is logged once, when it happens.

mod cping;

use crate::config::{HealthCheck, HealthCheckKind};
use crate::routing::{now_ms, Health, ServerSlot};
use crate::state::snapshot::SharedSnapshot;
use async_trait::async_trait;
use log::{debug, info, warn};
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use pingora_load_balancing::health_check::{HealthCheck as Probe, HttpHealthCheck, TcpHealthCheck};
use pingora_load_balancing::Backend;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the service looks for due checks.
const TICK: Duration = Duration::from_millis(100);

/// A server's check, kept between ticks: each one holds a connector, whose TLS context
/// (with the openssl backend) is costly to build: built on every check, it ate into the
/// check's own connect timeout.
type Kept = (
    HealthCheck,
    std::net::SocketAddr,
    Arc<dyn Probe + Send + Sync>,
);

/// Consecutive results of one server's checks.
#[derive(Default)]
struct Streak {
    next_due: Option<Instant>,
    passes: u32,
    failures: u32,
    probe: Option<Kept>,
}

impl Streak {
    /// The check for `server` with settings `hc`, built again only when they changed.
    fn probe(&mut self, hc: &HealthCheck, server: &ServerSlot) -> Arc<dyn Probe + Send + Sync> {
        match &self.probe {
            Some((h, a, p)) if h == hc && *a == server.config.address => p.clone(),
            _ => {
                let p: Arc<dyn Probe + Send + Sync> = Arc::from(probe(hc, server));
                self.probe = Some((hc.clone(), server.config.address, p.clone()));
                p
            }
        }
    }
}

pub struct HealthChecker {
    snapshot: SharedSnapshot,
    /// Per (cluster, server): only this service's task touches it.
    streaks: Mutex<HashMap<(String, String), Streak>>,
    /// The fleet's health hints: servers this instance marks down are published, servers
    /// others marked down are checked at the next tick (`fleet/hints.rs`).
    fleet: Option<Arc<crate::services::fleet::Fleet>>,
}

/// Builds the pingora-load-balancing check for a cluster's settings.
fn probe(hc: &HealthCheck, server: &ServerSlot) -> Box<dyn Probe + Send + Sync> {
    match hc.kind {
        HealthCheckKind::Tcp => {
            let mut check = TcpHealthCheck::new();
            check.peer_template.options.connection_timeout = Some(hc.timeout);
            check
        }
        HealthCheckKind::Http => {
            let host = hc
                .host
                .clone()
                .unwrap_or_else(|| server.config.address.to_string());
            let mut check = HttpHealthCheck::new(&host, false);
            check.peer_template.options.connection_timeout = Some(hc.timeout);
            check.peer_template.options.read_timeout = Some(hc.timeout);
            if let Ok(mut req) = pingora_http::RequestHeader::build("GET", hc.path.as_bytes(), None)
            {
                let _ = req.insert_header("Host", &host);
                let _ = req.insert_header("User-Agent", "tether-health-check");
                check.req = req;
            }
            let (lo, hi) = hc.expect;
            check.validator = Some(Box::new(move |resp| {
                let status = resp.status.as_u16();
                if (lo..=hi).contains(&status) {
                    Ok(())
                } else {
                    pingora_error::Error::e_explain(
                        pingora_error::ErrorType::CustomCode("unexpected status", status),
                        "health check",
                    )
                }
            }));
            Box::new(check)
        }
        HealthCheckKind::Cping => Box::new(cping::CpingCheck {
            timeout: hc.timeout,
        }),
    }
}

/// Runs one check within the timeout; `Err` carries a short reason for the log.
async fn run_check(
    hc: &HealthCheck,
    server: &ServerSlot,
    check: Arc<dyn Probe + Send + Sync>,
) -> Result<(), String> {
    let backend = Backend {
        addr: pingora_core::protocols::l4::socket::SocketAddr::Inet(server.config.address),
        weight: 1,
        ext: Default::default(),
    };
    let addr = server.config.address;
    match tokio::time::timeout(hc.timeout, check.check(&backend)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            debug!("health check of {addr}: {e}");
            Err(match e.etype() {
                pingora_error::ErrorType::CustomCode(_, status) => {
                    format!("HTTP {status} from {} ({addr})", hc.path)
                }
                _ => crate::pipeline::reason::of(&e, addr, Some(hc.timeout)),
            })
        }
        Err(_) => Err(format!(
            "timed out after {} ({addr})",
            crate::pipeline::reason::duration(hc.timeout)
        )),
    }
}

impl HealthChecker {
    pub fn new(snapshot: SharedSnapshot) -> Self {
        HealthChecker {
            snapshot,
            streaks: Mutex::default(),
            fleet: None,
        }
    }

    /// Shares down marks with `fleet` as hints.
    pub fn with_fleet(mut self, fleet: Option<Arc<crate::services::fleet::Fleet>>) -> Self {
        self.fleet = fleet;
        self
    }

    /// Runs every check that is due, then applies the results.
    async fn tick(&self) {
        let snapshot = self.snapshot.load_full();
        let now = Instant::now();
        let mut due = Vec::new();
        {
            let mut streaks = self.streaks.lock().unwrap_or_else(|e| e.into_inner());
            // Another instance marked these down: check them now, not at their interval.
            for key in self.fleet.iter().flat_map(|f| f.hints.take_inbox()) {
                if let Some(streak) = streaks.get_mut(&key) {
                    streak.next_due = None;
                }
            }
            let mut alive = std::collections::HashSet::new();
            for router in snapshot.clusters.iter() {
                let Some(hc) = router.health_check() else {
                    continue;
                };
                for (i, slot) in router.servers().iter().enumerate() {
                    // A name with no address yet: nothing to check.
                    if slot.config.unresolved.is_some() {
                        continue;
                    }
                    let key = (router.name.clone(), slot.config.name.clone());
                    let streak = streaks.entry(key.clone()).or_default();
                    if streak.next_due.is_none_or(|t| t <= now) {
                        streak.next_due = Some(now + hc.interval);
                        due.push((router.clone(), i, streak.probe(hc, slot)));
                    }
                    alive.insert(key);
                }
            }
            // Servers removed by a reload are forgotten.
            streaks.retain(|k, _| alive.contains(k));
        }
        let results = futures::future::join_all(due.iter().map(|(router, i, check)| {
            let hc = router.health_check().expect("filtered above");
            run_check(hc, &router.servers()[*i], check.clone())
        }))
        .await;
        let mut streaks = self.streaks.lock().unwrap_or_else(|e| e.into_inner());
        for ((router, i, _), result) in due.iter().zip(results) {
            let hc = router.health_check().expect("filtered above");
            let slot = &router.servers()[*i];
            let key = (router.name.clone(), slot.config.name.clone());
            let Some(streak) = streaks.get_mut(&key) else {
                continue;
            };
            if apply(hc, &router.name, slot, streak, result) {
                if let Some(f) = &self.fleet {
                    f.hints.marked_down(&router.name, &slot.config.name);
                }
            }
        }
    }
}

/// Counts the result and flips health when a threshold is reached; true when it marked
/// the server down.
fn apply(
    hc: &HealthCheck,
    cluster: &str,
    slot: &ServerSlot,
    streak: &mut Streak,
    result: Result<(), String>,
) -> bool {
    let name = &slot.config.name;
    slot.live.checked(result.as_ref().err().cloned());
    match result {
        Ok(()) => {
            streak.passes += 1;
            streak.failures = 0;
            slot.live.end_ejection();
            if streak.passes >= hc.rise && slot.live.mark_up() {
                info!(
                    "cluster {cluster} server {name}: health check passed {} times: up",
                    streak.passes
                );
            }
        }
        Err(reason) => {
            streak.failures += 1;
            streak.passes = 0;
            let up = slot.live.health() == Health::Up;
            if streak.failures >= hc.fall && up && slot.live.mark_down_because(now_ms(), &reason) {
                warn!("cluster {cluster} server {name}: health check failed {} times ({reason}): down", streak.failures);
                return true;
            }
            slot.live.still_down_because(&reason);
        }
    }
    false
}

#[async_trait]
impl BackgroundService for HealthChecker {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => self.tick().await,
                _ = shutdown.changed() => return,
            }
        }
    }
}
