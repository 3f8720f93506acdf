//! Turns raw config types into the validated model, collecting every error.

use super::check::{check_name, cidrs, Check, HOUR};
use super::clusters::{cluster, servers};
use super::error::ConfigError;
use super::model::*;
use super::operations;
use super::raw::{RawConfig, RawServerSettings};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

/// Validates `raw`; the returned config is meaningful only when no error was added.
pub fn validate(raw: RawConfig, errors: &mut Vec<ConfigError>) -> Config {
    let mut check = Check(errors);
    let server = server_settings(raw.server, &mut check);
    let resolver = super::resolver::resolver(raw.resolver.as_ref(), &mut check);
    // With nameservers of its own, tether resolves names itself, after loading; else the
    // system's resolver answers at load, and then again while tether runs.
    let resolve_now = resolver.nameservers.is_empty();
    let clusters_complete = raw.clusters.iter().all(|c| c.cluster.is_some());
    let mut clusters = Vec::new();
    let mut cluster_names = HashMap::new();
    let mut cluster_plugins = Vec::new();
    for (i, item) in raw.clusters.into_iter().enumerate() {
        let path = format!("clusters[{i}]");
        let Some(mut c) = item.cluster else {
            // The cluster's own fields are broken; its servers are still checked.
            servers(
                &item.servers,
                (SessionStyle::Tomcat, 0, resolve_now),
                &path,
                &mut check,
            );
            continue;
        };
        let name_path = format!("{path}.name");
        check_name(&mut check, name_path.clone(), &c.name);
        check.unique(
            &mut cluster_names,
            c.name.clone(),
            name_path,
            "cluster name",
            &c.name,
        );
        cluster_plugins.push((path.clone(), std::mem::take(&mut c.plugins)));
        clusters.push(cluster(c, &item.servers, resolve_now, &path, &mut check));
    }
    if clusters.is_empty() && clusters_complete {
        check.err("clusters", "at least one cluster is required");
    }

    let mut listeners = Vec::new();
    let mut listener_plugins = Vec::new();
    let mut route_plugins = Vec::new();
    let mut warnings = unresolved_warnings(&clusters, resolve_now);
    let mut listener_names = HashMap::new();
    let mut listener_addrs = HashMap::new();
    for (i, l) in raw.listeners.iter().enumerate() {
        let Some(l) = l else { continue };
        let path = format!("listeners[{i}]");
        check_name(&mut check, format!("{path}.name"), &l.name);
        check.unique(
            &mut listener_names,
            l.name.clone(),
            format!("{path}.name"),
            "listener name",
            &l.name,
        );
        let address = match l.address.parse::<SocketAddr>() {
            Ok(a) => {
                check.unique(
                    &mut listener_addrs,
                    a,
                    format!("{path}.address"),
                    "listener address",
                    &l.address,
                );
                a
            }
            Err(_) => {
                check.err(
                    format!("{path}.address"),
                    format!("`{}` is not an IP:port address", l.address),
                );
                SocketAddr::from(([0, 0, 0, 0], 0))
            }
        };
        let redirect_https = l
            .redirect_https
            .as_ref()
            .map(|r| super::tls::redirect(r, &path, &mut check));
        let cluster = match &l.cluster {
            Some(name) => {
                let found = clusters.iter().position(|c| &c.name == name);
                if found.is_none() && clusters_complete {
                    check.err(format!("{path}.cluster"), unknown_cluster(name, &clusters));
                }
                found
            }
            None if redirect_https.is_some() || !l.routes.is_empty() || l.serve.is_some() => None,
            None => {
                check.err(
                    format!("{path}.cluster"),
                    "required (unless the listener has routes, or only redirects: redirect_https)",
                );
                None
            }
        };
        let routes = super::routes::routes(
            &l.routes,
            &l.name,
            &path,
            &clusters,
            clusters_complete,
            &mut check,
        );
        warnings.extend(super::routes::warnings(&routes, &path));
        let route_order = super::routes::order(l.route_order.as_deref(), &path, &mut check);
        let tls = l
            .tls
            .as_ref()
            .map(|t| super::tls::listener_tls(t, &path, &mut check));
        listeners.push(Listener {
            name: l.name.clone(),
            address,
            cluster,
            routes,
            route_order,
            error_pages: super::error_pages::error_pages(l.error_pages.as_ref(), &path, &mut check),
            compress: l
                .compress
                .as_ref()
                .map(|c| super::compress::compress(c, &format!("{path}.compress"), &mut check)),
            serve: l
                .serve
                .as_ref()
                .map(|s| super::serve::files(s, &format!("{path}.serve"), &mut check)),
            forwarded_headers: l.forwarded_headers.unwrap_or(true),
            trusted_proxies: cidrs(
                &l.trusted_proxies,
                &format!("{path}.trusted_proxies"),
                &mut check,
            ),
            proxy_protocol: l.proxy_protocol.as_ref().map(|p| {
                let field = format!("{path}.proxy_protocol.from");
                if p.from.is_empty() {
                    check.err(
                        &field,
                        "name the balancers that send it (CIDRs or addresses)",
                    );
                }
                cidrs(&p.from, &field, &mut check)
            }),
            plugins: Vec::new(),
            limits: limits(l.limits.clone().unwrap_or_default(), &path, &mut check),
            client_limits: l
                .client_limits
                .as_ref()
                .map(|c| super::client_limits::client_limits(c, &path, &mut check)),
            h2c: l.h2c.unwrap_or(false),
            http1: http1_path(l.http1.as_deref(), &path, &mut check),
            http2: http2_path(l.http2.as_deref(), &path, &mut check),
            http3: super::http3::on(l, &path, &mut check),
            http3_retry_above: super::http3::retry_above(l, &path, &mut check),
            alt_svc_max_age: super::http3::alt_svc_max_age(l, &path, &mut check),
            tls,
            redirect_https,
        });
        listener_plugins.push((path, l.plugins.clone()));
        route_plugins.push(
            l.routes
                .iter()
                .map(|r| r.plugins.clone())
                .collect::<Vec<_>>(),
        );
    }
    if raw.listeners.is_empty() {
        check.err("listeners", "at least one listener is required");
    }
    // Plugins may name any cluster or server, so they are checked once all are known.
    let targets = operations::known_targets(&clusters);
    for ((listener, (path, values)), routes) in listeners
        .iter_mut()
        .zip(&listener_plugins)
        .zip(&route_plugins)
    {
        listener.plugins =
            operations::plugins(values, &format!("{path}.plugins"), &targets, &mut check);
        for (i, (route, values)) in listener.routes.iter_mut().zip(routes).enumerate() {
            route.plugins = operations::plugins(
                values,
                &format!("{path}.routes[{i}].plugins"),
                &targets,
                &mut check,
            );
        }
    }
    for (cluster, (path, values)) in clusters.iter_mut().zip(&cluster_plugins) {
        cluster.plugins =
            operations::plugins(values, &format!("{path}.plugins"), &targets, &mut check);
    }
    if server.work_stealing {
        // A script's VM is its worker thread's, and so is a request's `ctx` table in it.
        let scripted = listeners
            .iter()
            .flat_map(|l| {
                l.plugins
                    .iter()
                    .chain(l.routes.iter().flat_map(|r| &r.plugins))
            })
            .chain(clusters.iter().flat_map(|c| &c.plugins))
            .any(|p| matches!(p, PluginSpec::Script(_)));
        if scripted {
            check.err(
                "server.work_stealing",
                "scripts need work_stealing: false (each worker thread runs its own VM, \
                 which a request must not leave between its phases)",
            );
        }
    }

    let admin = raw
        .admin
        .map(|a| operations::admin(a, &listeners, &mut check));
    warnings.extend(admin.iter().flat_map(operations::admin_warnings));
    let metrics = raw
        .metrics
        .and_then(|m| operations::metrics(m, &listeners, admin.as_ref(), &mut check));
    let access_log = raw
        .access_log
        .filter(|a| a.enabled.unwrap_or(true))
        .map(|a| AccessLogSettings {
            path: a.path.into(),
            mask_session_ids: a.mask_session_ids.unwrap_or(true),
        });
    let watch_config = raw.watch_config.as_deref().map(|w| {
        check.duration(
            "watch_config".into(),
            Some(w),
            Duration::from_secs(2),
            Duration::from_millis(100)..=HOUR,
        )
    });
    let shared_state = raw
        .shared_state
        .map(|s| super::shared_state::validate(s, &mut check));
    Config {
        shared_state,
        resolver,
        warnings,
        watch_config,
        admin,
        metrics,
        access_log,
        server,
        state_dir: raw.state_dir.map(Into::into),
        listeners,
        clusters,
    }
}

fn server_settings(raw: RawServerSettings, check: &mut Check) -> ServerSettings {
    let d = ServerSettings::default();
    let threads = check.count("server.threads", raw.threads.unwrap_or(d.threads), 1..=1024);
    // Pingora sleeps for these; SIGINT still stops at once whatever they are.
    let grace_period_seconds = check.count(
        "server.grace_period_seconds",
        raw.grace_period_seconds.unwrap_or(d.grace_period_seconds),
        0..=MAX_SHUTDOWN_SECONDS,
    );
    let graceful_shutdown_timeout_seconds = check.count(
        "server.graceful_shutdown_timeout_seconds",
        raw.graceful_shutdown_timeout_seconds
            .unwrap_or(d.graceful_shutdown_timeout_seconds),
        0..=MAX_SHUTDOWN_SECONDS,
    );
    let upstream_keepalive_pool_size = check.count(
        "server.upstream_keepalive_pool_size",
        raw.upstream_keepalive_pool_size
            .unwrap_or(d.upstream_keepalive_pool_size),
        0..=1_000_000,
    );
    let idle_buffers_per_thread = check.count(
        "server.idle_buffers_per_thread",
        raw.idle_buffers_per_thread
            .unwrap_or(d.idle_buffers_per_thread),
        0..=1_000_000,
    );
    // The old and the new process of an upgrade must find these at the same place.
    for (field, value) in [
        ("pid_file", &raw.pid_file),
        ("upgrade_sock", &raw.upgrade_sock),
    ] {
        if let Some(v) = value.as_deref().filter(|v| !v.starts_with('/')) {
            check.err(
                format!("server.{field}"),
                format!("`{v}` must be an absolute path"),
            );
        }
    }
    ServerSettings {
        threads,
        work_stealing: raw.work_stealing.unwrap_or(d.work_stealing),
        grace_period_seconds,
        graceful_shutdown_timeout_seconds,
        pid_file: raw.pid_file.unwrap_or(d.pid_file),
        upgrade_sock: raw.upgrade_sock.unwrap_or(d.upgrade_sock),
        error_log: raw.error_log,
        daemon: raw.daemon.unwrap_or(d.daemon),
        user: raw.user,
        group: raw.group,
        upstream_keepalive_pool_size,
        idle_buffers_per_thread,
    }
}

/// `http1: engine | proxy`. Unset, the environment's `TETHER_HTTP1` decides (so that the
/// whole test suite can run on either), else `engine`. `lean`, the name of an experiment the
/// engine replaced, still means `engine`, so that a config that set it keeps loading.
fn http1_path(raw: Option<&str>, path: &str, check: &mut Check) -> Http1Path {
    let env = std::env::var("TETHER_HTTP1").ok();
    let (value, field) = match (raw, env.as_deref()) {
        (Some(v), _) => (v, format!("{path}.http1")),
        (None, Some(v)) => (v, "TETHER_HTTP1 (environment)".to_string()),
        (None, None) => return Http1Path::Engine,
    };
    match value {
        "proxy" => Http1Path::Proxy,
        "engine" | "lean" => Http1Path::Engine,
        other => {
            check.err(
                field,
                format!("`{other}` is not `engine` (tether's own HTTP/1 engine, the default) or `proxy` (Pingora's proxy for every request)"),
            );
            Http1Path::Engine
        }
    }
}

/// `http2: engine | proxy`. Unset, the environment's `TETHER_HTTP2` decides (so that the
/// whole test suite can run on either), else `engine`.
fn http2_path(raw: Option<&str>, path: &str, check: &mut Check) -> Http2Path {
    let env = std::env::var("TETHER_HTTP2").ok();
    let (value, field) = match (raw, env.as_deref()) {
        (Some(v), _) => (v, format!("{path}.http2")),
        (None, Some(v)) => (v, "TETHER_HTTP2 (environment)".to_string()),
        (None, None) => return Http2Path::Engine,
    };
    match value {
        "proxy" => Http2Path::Proxy,
        "engine" => Http2Path::Engine,
        other => {
            check.err(
                field,
                format!("`{other}` is not `engine` (tether's own HTTP/2 front end, the default) or `proxy` (Pingora's proxy for every HTTP/2 stream)"),
            );
            Http2Path::Engine
        }
    }
}

/// A listener's `limits:`, each bounded.
fn limits(raw: super::raw::RawLimits, path: &str, check: &mut Check) -> ListenerLimits {
    let d = ListenerLimits::default();
    let p = |f: &str| format!("{path}.limits.{f}");
    let secs = Duration::from_secs;
    ListenerLimits {
        max_request_head: check.count(
            p("max_request_head"),
            raw.max_request_head.unwrap_or(d.max_request_head),
            1024..=1_048_576,
        ),
        request_head_timeout: check.duration(
            p("request_head_timeout"),
            raw.request_head_timeout.as_deref(),
            d.request_head_timeout,
            secs(1)..=secs(600),
        ),
        keepalive_timeout: check.duration(
            p("keepalive_timeout"),
            raw.keepalive_timeout.as_deref(),
            d.keepalive_timeout,
            secs(1)..=HOUR,
        ),
        max_connections: check.count(
            p("max_connections"),
            raw.max_connections.unwrap_or(d.max_connections),
            1..=1_000_000,
        ),
        request_buffer: check.count(
            p("request_buffer"),
            raw.request_buffer.unwrap_or(d.request_buffer),
            0..=MAX_REQUEST_BUFFER,
        ),
        max_request_body: check.count(
            p("max_request_body"),
            raw.max_request_body.unwrap_or(d.max_request_body),
            0..=MAX_REQUEST_BODY,
        ),
        request_body_timeout: check.duration(
            p("request_body_timeout"),
            raw.request_body_timeout.as_deref(),
            d.request_body_timeout,
            secs(1)..=HOUR,
        ),
        send_timeout: check.duration(
            p("send_timeout"),
            raw.send_timeout.as_deref(),
            d.send_timeout,
            secs(1)..=HOUR,
        ),
        request_body_min_rate: check.count(
            p("request_body_min_rate"),
            raw.request_body_min_rate.unwrap_or(d.request_body_min_rate),
            0..=1_000_000_000,
        ),
        request_body_grace: check.duration(
            p("request_body_grace"),
            raw.request_body_grace.as_deref(),
            d.request_body_grace,
            secs(1)..=HOUR,
        ),
        send_min_rate: check.count(
            p("send_min_rate"),
            raw.send_min_rate.unwrap_or(d.send_min_rate),
            0..=1_000_000_000,
        ),
        send_grace: check.duration(
            p("send_grace"),
            raw.send_grace.as_deref(),
            d.send_grace,
            secs(1)..=HOUR,
        ),
        tunnel_idle_timeout: check.duration(
            p("tunnel_idle_timeout"),
            raw.tunnel_idle_timeout.as_deref(),
            d.tunnel_idle_timeout,
            secs(1)..=secs(24 * 3600),
        ),
    }
}

/// "unknown cluster", with the known names and a hint when only the case differs.
fn unknown_cluster(name: &str, clusters: &[Cluster]) -> String {
    let known: Vec<String> = clusters.iter().map(|c| format!("`{}`", c.name)).collect();
    let mut message = format!("unknown cluster `{name}` (known: {})", known.join(", "));
    if let Some(c) = clusters.iter().find(|c| c.name.eq_ignore_ascii_case(name)) {
        message.push_str(&format!(
            "; names are case-sensitive: did you mean `{}`?",
            c.name
        ));
    }
    message
}

/// A server whose name the system did not resolve at load: down until it does (the
/// WebSphere plug-in's `IgnoreDNSFailures`), said as a warning rather than refusing the
/// whole config.
fn unresolved_warnings(clusters: &[Cluster], resolved_now: bool) -> Vec<ConfigError> {
    if !resolved_now {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, c) in clusters.iter().enumerate() {
        for (j, s) in c.servers.iter().enumerate() {
            if let Some(why) = &s.unresolved {
                out.push(ConfigError::new(
                    format!("clusters[{i}].servers[{j}].address"),
                    format!("{why}: the server is down until it resolves"),
                ));
            }
        }
    }
    out
}
