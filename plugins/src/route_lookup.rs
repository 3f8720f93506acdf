//! `route_lookup`: asks an HTTP API which cluster or server serves a user, like nginx's
//! `auth_request` + `auth_request_set $upstream_http_...` + `proxy_pass $url`, but safely:
//!
//! - non-blocking, on a pooled keep-alive client (Pingora's connector);
//! - cached (TTL, bounded size, a separate TTL for "no route"), and concurrent look-ups of
//!   one key share one API call;
//! - bounded by a timeout (default 200 ms); a failure is cached briefly too (`error_ttl`),
//!   and a circuit breaker stops asking a service that keeps failing, so a hanging service
//!   costs the timeout a few times, not on every request;
//! - the answer must name a configured cluster or `cluster/server`: anything else is
//!   rejected and counted, never used as an address;
//! - on error, timeout or rejection: `fallback: balance` (the listener's cluster, normal
//!   balancing) or `fallback: reject` (503).

mod breaker;
mod client;
mod settings;

pub use settings::{AnswerSource, Fallback, Settings};

use crate::config_error::PluginConfigError;
use crate::metrics::{self, LookupMetrics, Outcome};
use crate::target::KnownTargets;
use crate::{Connection, Plugin, RequestState, Route};
use async_trait::async_trait;
use breaker::{Breaker, Change, Permit};
use client::{Answer, Client, LookupError};
use pingora_http::RequestHeader;
use prometheus::IntGauge;
use serde_yaml::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn parse(entry: &Value, _targets: &KnownTargets) -> Result<Settings, Vec<PluginConfigError>> {
    Settings::parse(entry)
}

/// What the cache keeps for a key: the service's answer, or its failure (shared, so a hit
/// on it copies a pointer, not the message).
type Cached = Result<Answer, Arc<LookupError>>;

/// Per-entry expiry: routes live `ttl`, "no route" answers `negative_ttl`, failures
/// `error_ttl`.
struct Expiry {
    ttl: Duration,
    negative_ttl: Duration,
    error_ttl: Duration,
}

impl moka::Expiry<String, Cached> for Expiry {
    fn expire_after_create(
        &self,
        _key: &String,
        value: &Cached,
        _now: Instant,
    ) -> Option<Duration> {
        Some(match value {
            Ok(Answer::Route(_)) => self.ttl,
            Ok(Answer::NoRoute) => self.negative_ttl,
            Err(_) => self.error_ttl,
        })
    }
}

pub struct RouteLookup {
    settings: Settings,
    client: Client,
    cache: moka::future::Cache<String, Cached>,
    breaker: Breaker,
    metrics: LookupMetrics,
    circuit_open: IntGauge,
    /// The error of a short-circuited look-up, made once: that path allocates nothing.
    not_asked: Arc<LookupError>,
}

impl RouteLookup {
    pub fn new(settings: Settings, targets: Arc<KnownTargets>) -> Self {
        let cache = moka::future::Cache::builder()
            .max_capacity(settings.max_entries)
            .expire_after(Expiry {
                ttl: settings.ttl,
                negative_ttl: settings.negative_ttl,
                error_ttl: settings.error_ttl,
            })
            .build();
        RouteLookup {
            client: Client::new(&settings, targets),
            cache,
            breaker: Breaker::new(settings.circuit_failures, settings.circuit_cooldown),
            metrics: LookupMetrics::new("route_lookup"),
            circuit_open: metrics::circuit_open("route_lookup"),
            not_asked: Arc::new(LookupError::CircuitOpen),
            settings,
        }
    }

    /// The cached answer (or failure), or one API call shared by every concurrent request
    /// for `key`; nothing asked while the circuit breaker is open.
    async fn answer(&self, key: &str) -> Cached {
        if let Some(c) = self.cache.get(key).await {
            self.metrics.count(match c {
                Ok(_) => Outcome::Hit,
                Err(_) => Outcome::CachedError,
            });
            return c;
        }
        let Some(permit) = self.breaker.permit(self.breaker.now()) else {
            self.metrics.count(Outcome::ShortCircuit);
            return Err(self.not_asked.clone());
        };
        let asked = AtomicBool::new(false);
        // A failure is cached too (for `error_ttl`): a hanging service costs each key the
        // timeout once, not on every request.
        let result = self
            .cache
            .get_with(key.to_string(), async {
                asked.store(true, Ordering::Relaxed);
                let start = Instant::now();
                let r =
                    match tokio::time::timeout(self.settings.timeout, self.client.ask(key)).await {
                        Ok(r) => r,
                        Err(_) => Err(LookupError::Timeout),
                    };
                self.metrics.observe(start.elapsed().as_secs_f64());
                self.settle(permit, &r);
                r.map_err(Arc::new)
            })
            .await;
        let outcome = match result.as_ref().map_err(|e| &**e) {
            // Another request's call answered this one: as good as a cache hit.
            Ok(_) if !asked.load(Ordering::Relaxed) => Outcome::Hit,
            Ok(_) => Outcome::Miss,
            Err(LookupError::Timeout) => Outcome::Timeout,
            Err(LookupError::Rejected(_)) => Outcome::Rejected,
            Err(LookupError::CircuitOpen) => Outcome::ShortCircuit,
            Err(_) => Outcome::Error,
        };
        self.metrics.count(outcome);
        result
    }

    /// Tells the breaker how the call went; logs and counts when it opens or closes.
    fn settle(&self, permit: Permit<'_>, result: &Result<Answer, LookupError>) {
        let change = match result {
            // A rejected answer is still an answer: the service is up.
            Ok(_) | Err(LookupError::Rejected(_)) => permit.success(),
            Err(_) => permit.failure(self.breaker.now()),
        };
        let service = &self.settings.host;
        match change {
            Change::None => {}
            Change::Opened => {
                self.circuit_open.inc();
                let fallback = match self.settings.fallback {
                    Fallback::Balance => "balance",
                    Fallback::Reject => "reject",
                };
                log::warn!(
                    "route_lookup: {service} failed {} times in a row; not asking it for {:?} (requests use the fallback: {fallback})",
                    self.settings.circuit_failures,
                    self.settings.circuit_cooldown,
                );
            }
            Change::Closed => {
                self.circuit_open.dec();
                log::info!("route_lookup: {service} answers again; asking it again");
            }
        }
    }

    fn fallback(&self) -> Route {
        match self.settings.fallback {
            Fallback::Balance => Route::Continue,
            Fallback::Reject => Route::Respond {
                status: 503,
                headers: Vec::new(),
                body: "503 Service Unavailable: the routing service did not answer\n".into(),
            },
        }
    }
}

#[async_trait]
impl Plugin for RouteLookup {
    fn name(&self) -> &'static str {
        "route_lookup"
    }

    async fn route(
        &self,
        req: &RequestHeader,
        conn: &Connection,
        _state: &mut RequestState,
    ) -> Route {
        let Some(key) = self.settings.key.extract(req, conn) else {
            return Route::Continue;
        };
        match self.answer(&key).await {
            Ok(Answer::Route(t)) => Route::To(t),
            Ok(Answer::NoRoute) => Route::Continue,
            Err(e) => {
                log::debug!("route_lookup for `{key}`: {e}");
                self.fallback()
            }
        }
    }
}

impl Drop for RouteLookup {
    /// A plugin replaced by a reload while its breaker is open leaves the gauge.
    fn drop(&mut self) {
        if self.breaker.is_open() {
            self.circuit_open.dec();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Target;
    use std::sync::Mutex;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A loopback look-up service: answers `X-Route: shop` while `up`, and otherwise never
    /// answers (a hanging API). It records the path of every request.
    struct Service {
        addr: std::net::SocketAddr,
        up: Arc<AtomicBool>,
        paths: Arc<Mutex<Vec<String>>>,
    }

    impl Service {
        async fn start(up: bool) -> Service {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let s = Service {
                addr: listener.local_addr().unwrap(),
                up: Arc::new(AtomicBool::new(up)),
                paths: Arc::default(),
            };
            let (up, paths) = (s.up.clone(), s.paths.clone());
            tokio::spawn(async move {
                while let Ok((sock, _)) = listener.accept().await {
                    tokio::spawn(serve(sock, up.clone(), paths.clone()));
                }
            });
            s
        }

        fn calls(&self) -> usize {
            self.paths.lock().unwrap().len()
        }
    }

    async fn serve(
        mut sock: tokio::net::TcpStream,
        up: Arc<AtomicBool>,
        paths: Arc<Mutex<Vec<String>>>,
    ) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                match sock.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                continue;
            };
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let path = head.split(' ').nth(1).unwrap_or_default().to_string();
            paths.lock().unwrap().push(path);
            if !up.load(Ordering::SeqCst) {
                // Hang until the client gives up and closes.
                let _ = sock.read(&mut chunk).await;
                return;
            }
            let resp = "HTTP/1.1 200 OK\r\nX-Route: shop\r\nContent-Length: 0\r\n\r\n";
            if sock.write_all(resp.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    const SHOP: Route = Route::To(Target {
        cluster: 0,
        server: None,
    });

    /// `route_lookup` with a 100 ms timeout against `service`, plus `extra` settings.
    fn plugin(service: &Service, extra: &str) -> RouteLookup {
        let yaml = format!(
            "{{ name: route_lookup, key: {{ header: X-User }}, url: \"http://{}/route/{{key}}\", answer: {{ header: X-Route }}, timeout: 100ms, {extra} }}",
            service.addr
        );
        let settings = Settings::parse(&serde_yaml::from_str(&yaml).unwrap()).unwrap();
        RouteLookup::new(settings, Arc::new(KnownTargets::new([("shop", vec!["a"])])))
    }

    /// Routes a request of `user`; what the plugin said and how long it took.
    async fn route_as(p: &RouteLookup, user: &str) -> (Route, Duration) {
        let mut req = RequestHeader::build("GET", b"/", None).unwrap();
        req.insert_header("X-User", user).unwrap();
        let start = Instant::now();
        let mut state = crate::RequestState::default();
        let route = p.route(&req, &Connection::default(), &mut state).await;
        (route, start.elapsed())
    }

    const TIMEOUT: Duration = Duration::from_millis(100);

    #[tokio::test]
    async fn a_failure_is_cached_for_its_key_for_error_ttl() {
        let service = Service::start(false).await;
        // A breaker that never opens here: only the error cache is at work.
        let p = plugin(
            &service,
            "cache: { error_ttl: 400ms }, circuit: { failures: 1000 }",
        );
        let (route, took) = route_as(&p, "001").await;
        assert_eq!(route, Route::Continue, "fallback: balance");
        assert!(took >= TIMEOUT, "waited for the timeout ({took:?})");
        // The same key again: the cached failure, at once, without asking.
        for _ in 0..3 {
            let (route, took) = route_as(&p, "001").await;
            assert_eq!(route, Route::Continue);
            assert!(took < TIMEOUT, "did not wait again ({took:?})");
        }
        assert_eq!(service.calls(), 1, "asked once");
        // After error_ttl the key is asked again.
        service.up.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(route_as(&p, "001").await.0, SHOP);
        assert_eq!(service.calls(), 2);
    }

    #[tokio::test]
    async fn a_failing_service_is_not_asked_until_a_probe_succeeds() {
        let service = Service::start(false).await;
        let p = plugin(
            &service,
            "fallback: reject, cache: { error_ttl: 0s }, circuit: { failures: 2, cooldown: 400ms }",
        );
        let rejected = |r: &Route| matches!(r, Route::Respond { status: 503, .. });
        for user in ["001", "002"] {
            let (route, took) = route_as(&p, user).await;
            assert!(rejected(&route) && took >= TIMEOUT, "{route:?} {took:?}");
        }
        assert!(p.breaker.is_open(), "two failures in a row open it");
        // Open: other keys get the fallback at once, and the service is not asked.
        for user in ["003", "004", "001"] {
            let (route, took) = route_as(&p, user).await;
            assert!(rejected(&route), "{route:?}");
            assert!(took < TIMEOUT, "did not wait ({took:?})");
        }
        assert_eq!(service.calls(), 2);
        // After the cool-down one probe asks; it succeeds and closes the breaker.
        service.up.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(route_as(&p, "005").await.0, SHOP);
        assert!(!p.breaker.is_open());
        assert_eq!(route_as(&p, "006").await.0, SHOP);
        assert_eq!(service.calls(), 4);
    }

    #[tokio::test]
    async fn dot_keys_reach_the_service_encoded() {
        let service = Service::start(true).await;
        let p = plugin(&service, "");
        for user in [".", "..", "a.b"] {
            assert_eq!(route_as(&p, user).await.0, SHOP, "{user}");
        }
        assert_eq!(
            *service.paths.lock().unwrap(),
            ["/route/%2E", "/route/%2E%2E", "/route/a.b"]
        );
    }
}
