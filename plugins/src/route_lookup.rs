//! `route_lookup`: asks an HTTP API which cluster or server serves a user, like nginx's
//! `auth_request` + `auth_request_set $upstream_http_...` + `proxy_pass $url`, but safely:
//!
//! - non-blocking, on a pooled keep-alive client (Pingora's connector);
//! - cached (TTL, bounded size, a separate TTL for "no route"), and concurrent look-ups of
//!   one key share one API call;
//! - bounded by a timeout (default 200 ms);
//! - the answer must name a configured cluster or `cluster/server`: anything else is
//!   rejected and counted, never used as an address;
//! - on error, timeout or rejection: `fallback: balance` (the listener's cluster, normal
//!   balancing) or `fallback: reject` (503).

mod client;
mod settings;

pub use settings::{AnswerSource, Fallback, Settings};

use crate::metrics::{LookupMetrics, Outcome};
use crate::registry::{PluginConfigError, PluginSpec};
use crate::target::KnownTargets;
use crate::{Plugin, Route};
use async_trait::async_trait;
use client::{Answer, Client, LookupError};
use pingora_http::RequestHeader;
use serde_yaml::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn parse(entry: &Value, _targets: &KnownTargets) -> Result<PluginSpec, Vec<PluginConfigError>> {
    Settings::parse(entry).map(PluginSpec::RouteLookup)
}

/// Per-entry expiry: routes live `ttl`, "no route" answers `negative_ttl`.
struct Expiry {
    ttl: Duration,
    negative_ttl: Duration,
}

impl moka::Expiry<String, Answer> for Expiry {
    fn expire_after_create(
        &self,
        _key: &String,
        value: &Answer,
        _now: Instant,
    ) -> Option<Duration> {
        Some(match value {
            Answer::Route(_) => self.ttl,
            Answer::NoRoute => self.negative_ttl,
        })
    }
}

pub struct RouteLookup {
    settings: Settings,
    client: Client,
    cache: moka::future::Cache<String, Answer>,
    metrics: LookupMetrics,
}

impl RouteLookup {
    pub fn new(settings: Settings, targets: Arc<KnownTargets>) -> Self {
        let cache = moka::future::Cache::builder()
            .max_capacity(settings.max_entries)
            .expire_after(Expiry {
                ttl: settings.ttl,
                negative_ttl: settings.negative_ttl,
            })
            .build();
        RouteLookup {
            client: Client::new(&settings, targets),
            cache,
            metrics: LookupMetrics::new("route_lookup"),
            settings,
        }
    }

    /// The cached answer, or one API call shared by every concurrent request for `key`.
    async fn answer(&self, key: &str) -> Result<Answer, LookupError> {
        if let Some(a) = self.cache.get(key).await {
            self.metrics.count(Outcome::Hit);
            return Ok(a);
        }
        let asked = AtomicBool::new(false);
        let result = self
            .cache
            .try_get_with(key.to_string(), async {
                asked.store(true, Ordering::Relaxed);
                let start = Instant::now();
                let r =
                    match tokio::time::timeout(self.settings.timeout, self.client.ask(key)).await {
                        Ok(r) => r,
                        Err(_) => Err(LookupError::Timeout),
                    };
                self.metrics.observe(start.elapsed().as_secs_f64());
                r
            })
            .await
            .map_err(|e| (*e).clone());
        let outcome = match &result {
            // Another request's call answered this one: as good as a cache hit.
            Ok(_) if !asked.load(Ordering::Relaxed) => Outcome::Hit,
            Ok(_) => Outcome::Miss,
            Err(LookupError::Timeout) => Outcome::Timeout,
            Err(LookupError::Rejected(_)) => Outcome::Rejected,
            Err(_) => Outcome::Error,
        };
        self.metrics.count(outcome);
        result
    }

    fn fallback(&self) -> Route {
        match self.settings.fallback {
            Fallback::Balance => Route::Continue,
            Fallback::Reject => Route::Respond {
                status: 503,
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

    async fn route(&self, req: &RequestHeader) -> Route {
        let Some(key) = self.settings.key.extract(req) else {
            return Route::Continue;
        };
        match self.answer(key).await {
            Ok(Answer::Route(t)) => Route::To(t),
            Ok(Answer::NoRoute) => Route::Continue,
            Err(e) => {
                log::debug!("route_lookup for `{key}`: {e}");
                self.fallback()
            }
        }
    }
}
