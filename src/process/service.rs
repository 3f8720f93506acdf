//! Builds the Pingora server for a validated config: settings, listeners, proxy services.

use crate::config::{Config, Http1Path, Http2Path, ServerSettings, ServiceTls};
use crate::front::listener::accept_loop::AcceptLoop;
use crate::front::listener::Listener;
use crate::front::proxy::TetherProxy;
use crate::metrics;
use crate::pipeline::access_log::AccessLog;
use crate::process::reload::Reloader;
use crate::process::upgrade::successor::{self, StartSuccessor};
use crate::services::admin::AdminApp;
use crate::services::control::Control;
use crate::services::health::HealthChecker;
use crate::services::live_metrics::LiveCollector;
use crate::services::persist::{self, Persister};
use crate::state::snapshot::{SharedSnapshot, Snapshot};
use arc_swap::ArcSwap;
use pingora_core::connectors::ConnectorOptions;
use pingora_core::listeners::tls::TlsSettings;
use pingora_core::listeners::ListenerConfig;
use pingora_core::protocols::l4::stream::L4BufferSettings;
use pingora_core::server::configuration::{Opt, ServerConf};
use pingora_core::server::Server;
use pingora_core::services::background::background_service;
use pingora_core::services::listening::Service;
use pingora_core::services::ServiceWithDependents;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often changed partition tables are saved (and once more at shutdown).
const PERSIST_INTERVAL: Duration = Duration::from_secs(1);

/// Process-level switches from the command line (Pingora's own flags).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// `-u`: take the listening sockets over from a running instance.
    pub upgrade: bool,
    /// `-d`: run in the background.
    pub daemon: bool,
}

/// Socket buffering of the listeners on Pingora's accept: no read buffer of Pingora's.
/// Plain HTTP/1 (pingora-proxy's) reads into its parser's own buffers, where Pingora's
/// 64 KiB per connection would only add a copy, and memory for every connection held open.
/// TLS reads a record's header and body in one `recv` through tether's buffer, lent by the
/// thread only while a record is read ([`crate::state::tls::record_reads`]), where Pingora's
/// would be held for the connection's life. Writes keep Pingora's MSS-sized buffer, which
/// joins pingora-proxy's separate writes of a response's head and body.
const LISTENER_BUFFERS: L4BufferSettings = L4BufferSettings {
    read: Some(0),
    write: None,
};

/// Pingora's `ServerConf` from tether's `server:` section.
pub fn server_conf(s: &ServerSettings) -> ServerConf {
    ServerConf {
        threads: s.threads,
        work_stealing: s.work_stealing,
        grace_period_seconds: Some(s.grace_period_seconds),
        graceful_shutdown_timeout_seconds: Some(s.graceful_shutdown_timeout_seconds),
        pid_file: s.pid_file.clone(),
        upgrade_sock: s.upgrade_sock.clone(),
        error_log: s.error_log.clone(),
        daemon: s.daemon,
        user: s.user.clone(),
        group: s.group.clone(),
        upstream_keepalive_pool_size: s.upstream_keepalive_pool_size,
        ..ServerConf::default()
    }
}

/// A Pingora server with one proxy service per listener, the admin API when configured,
/// and the background services (health checks, partition table persistence), ready for
/// `run_forever`. `path` is the config file, for reloads.
pub fn build_server(
    config: Config,
    path: Option<PathBuf>,
    run: RunOptions,
) -> Result<(Server, Arc<Control>), String> {
    let opt = Opt {
        upgrade: run.upgrade,
        daemon: run.daemon,
        ..Opt::default()
    };
    let mut server = Server::new_with_opt_and_conf(opt, server_conf(&config.server));
    server.bootstrap();
    // Certificates and keys are loaded again to build the acceptors: a file that changed
    // since the config was checked fails the start here, with its name.
    let acceptors = crate::state::tls::build_listeners(&config)?;
    let upstream_tls = crate::state::tls::build_clusters(&config)?;
    for (l, a) in config.listeners.iter().zip(&acceptors) {
        if let Some(a) = a {
            metrics::certificate_expiry(&l.name, &a.expiry);
        }
    }
    for c in config
        .clusters
        .iter()
        .filter(|c| c.tls.as_ref().is_some_and(|t| !t.verify))
    {
        log::warn!(
            "cluster {}: TLS to the servers without verifying their certificates (tls.verify: false)",
            c.name
        );
    }
    let with_tls = |mut s: Snapshot| {
        s.tls = acceptors.clone().into();
        s.upstream_tls = upstream_tls.clone().into();
        s
    };
    if let Some(s) = &config.shared_state {
        // Session tables hash alike across the fleet and keep sketches for its count.
        crate::routing::join_fleet(&s.key_prefix);
    }
    let snapshot: SharedSnapshot = Arc::new(ArcSwap::from_pointee(with_tls(Snapshot::build(
        &config, None,
    ))));
    if let Some(dir) = &config.state_dir {
        match crate::services::overrides::load(&snapshot.load(), dir) {
            // Weights shape the balancing schedule: rebuild it with the saved ones.
            Ok(n) if n > 0 => {
                log::info!(
                    "applied {n} saved run-time server changes from {}",
                    dir.display()
                );
                let current = snapshot.load_full();
                snapshot.store(Arc::new(with_tls(Snapshot::build(&config, Some(&current)))));
            }
            Ok(_) => {}
            Err(e) => log::warn!("ignoring saved run-time changes in {}: {e}", dir.display()),
        }
        persist::mark_start();
        persist::load_all(&snapshot, dir);
        let persister = Persister::new(snapshot.clone(), dir.clone(), PERSIST_INTERVAL);
        server.add_service(background_service("partition tables", persister));
    }
    metrics::init(LiveCollector::new(snapshot.clone()));
    // Said once the services start: after daemonizing, so into the daemon's log file.
    let mut announce = Vec::new();
    if let Some(m) = &config.metrics {
        let mut service = pingora_prometheus::prometheus_http_service();
        let scheme = own_listener(&mut service, m.address, m.tls.as_ref(), "metrics")?;
        announce.push(format!(
            "metrics listening on {} ({scheme}, /metrics)",
            m.address
        ));
        server.add_service(service);
    }
    let access_log = match &config.access_log {
        Some(settings) => {
            let (log, writer) = AccessLog::open(settings).map_err(|e| {
                format!(
                    "cannot open the access log {}: {e}",
                    settings.path.display()
                )
            })?;
            // The writer thread starts with the background services, after daemonizing.
            server.add_service(background_service("access log", writer));
            Some(Arc::new(log))
        }
        None => None,
    };
    let fleet = config
        .shared_state
        .clone()
        .map(|s| crate::services::fleet::Fleet::new(s, config.state_dir.as_deref()));
    if config
        .clusters
        .iter()
        .any(|c| c.balance == crate::config::Balance::Sessions)
    {
        let counter = crate::services::session_counter::SessionCounter::new(snapshot.clone());
        server.add_service(background_service("session counts", counter));
    }
    if config.clusters.iter().any(|c| c.health_check.is_some()) {
        let checker = HealthChecker::new(snapshot.clone()).with_fleet(fleet.clone());
        server.add_service(background_service("health checks", checker));
    }
    for (i, listener) in config.listeners.iter().enumerate() {
        let name = format!("tether listener {}", listener.name);
        let proxy = pingora_proxy::http_proxy(
            &server.configuration,
            TetherProxy::new(snapshot.clone(), i, &listener.name, access_log.clone()),
        );
        let engine = (listener.http1 == Http1Path::Engine).then(|| {
            crate::front::engine::Engine::new(
                snapshot.clone(),
                i,
                &listener.name,
                access_log.clone(),
                ConnectorOptions::from_server_conf(&server.configuration),
                config.server.idle_buffers_per_thread,
            )
        });
        let http2 = (listener.http2 == Http2Path::Engine).then(|| {
            crate::front::http2::Http2::new(crate::front::streams::Streams::new(
                snapshot.clone(),
                i,
                &listener.name,
                access_log.clone(),
                ConnectorOptions::from_server_conf(&server.configuration),
            ))
        });
        if let (true, Some(tls)) = (listener.http3, &listener.tls) {
            server.add_service(crate::front::http3::Http3::new(
                listener,
                tls.clone(),
                config.state_dir.as_deref(),
                crate::front::streams::Streams::new(
                    snapshot.clone(),
                    i,
                    &listener.name,
                    access_log.clone(),
                    ConnectorOptions::from_server_conf(&server.configuration),
                ),
                server.watch_execution_phase(),
            ));
        }
        let app = Listener::new(
            proxy,
            snapshot.clone(),
            i,
            listener.name.clone(),
            listener.h2c && listener.tls.is_none(),
            (engine, http2),
        );
        // The engine's plain listeners accept on their own (`front/listener/accept_loop.rs`);
        // the others on Pingora's.
        let buffers = match (&listener.tls, listener.http1) {
            (None, Http1Path::Engine) => None,
            _ => Some(LISTENER_BUFFERS),
        };
        let service: Box<dyn ServiceWithDependents> = match buffers {
            None => Box::new(AcceptLoop::new(name, listener.address, app)),
            Some(buffers) => {
                let mut service = Service::new(name, app);
                service.add_listener(
                    ListenerConfig::tcp(listener.address.to_string()).l4_buffer(buffers),
                );
                Box::new(service)
            }
        };
        let default = match listener.cluster {
            Some(c) => format!("cluster {}", config.clusters[c].name),
            None => "no default cluster".to_string(),
        };
        let routes = match listener.routes.len() {
            0 => String::new(),
            n => format!(", {n} routes"),
        };
        let what = match (&listener.tls, &listener.redirect_https) {
            (_, Some(r)) => format!("redirecting to https port {}", r.port),
            (Some(_), None) => format!("TLS, {default}{routes}"),
            (None, None) => format!("{default}{routes}"),
        };
        announce.push(format!(
            "listener {} listening on {} ({what})",
            listener.name, listener.address
        ));
        server.add_boxed_service(service);
    }
    let admin = config.admin.clone();
    if let Some(a) = admin
        .as_ref()
        .filter(|a| a.token.is_none() && a.role_tokens.is_empty())
    {
        if !a.address.ip().is_loopback() {
            log::warn!(
                "admin API on {} has no token (allow_unauthenticated: true): anyone who reaches \
                 it can stop servers and reload the config",
                a.address
            );
        }
    }
    // Under systemd (Type=notify): tell it when tether serves and stops, and start the new
    // binary of `tether upgrade` from inside the service (docs/install.md, "Binary upgrades
    // under systemd").
    if crate::process::systemd::under_service_manager() {
        let addresses = crate::process::bind_check::addresses(&config)
            .into_iter()
            .map(|(_, a)| a)
            .collect();
        let phases = server.watch_execution_phase();
        let notifier = crate::process::systemd::Notifier::new(addresses, phases);
        server.add_service(background_service("systemd notifications", notifier));
        if let (Some(conf), Some(binary)) = (&path, successor::own_binary()) {
            let conf = conf.canonicalize().unwrap_or_else(|_| conf.clone());
            let starter = StartSuccessor::new(binary, conf, run.daemon);
            server.add_service(background_service("binary upgrades", starter));
        }
    }
    let watch = config.watch_config.zip(path.clone());
    let has_file = path.is_some();
    let control = Arc::new(Control::new(config, snapshot, path));
    if let Some(fleet) = fleet {
        // Before listening: the first requests see the fleet's tables and server states.
        control.join_fleet(fleet.clone());
        crate::services::fleet::load_at_start(&fleet, &control);
        let sync = crate::services::fleet::FleetSync::new(fleet, control.clone());
        server.add_service(background_service("fleet", sync));
    }
    if let Some(admin) = admin {
        let mut service = Service::new(
            "tether admin".to_string(),
            AdminApp::new(control.clone(), &admin),
        );
        let scheme = own_listener(&mut service, admin.address, admin.tls.as_ref(), "admin")?;
        announce.push(format!(
            "admin API listening on {} ({scheme})",
            admin.address
        ));
        server.add_service(service);
    }
    server.add_service(background_service("announce", Announce(announce)));
    server.add_service(background_service(
        "server names",
        crate::services::control::DnsRefresh::new(control.clone()),
    ));
    server.add_service(background_service(
        "fast stop",
        crate::process::fast_stop::FastStop::new(control.clone()),
    ));
    if has_file {
        let reloader = Reloader::new(control.clone(), watch.map(|(every, p)| (p, every)));
        server.add_service(background_service("config reload", reloader));
    }
    Ok((server, control))
}

/// Listens on `address` for one of tether's own services (the admin API, `/metrics`), over
/// TLS when `tls` is set, with Pingora's handshake; "https" or "http", for the start-up
/// line. The certificate is loaded again here (the config only checked it): a file that
/// changed since fails the start, naming `{section}.tls`.
fn own_listener<A>(
    service: &mut Service<A>,
    address: std::net::SocketAddr,
    tls: Option<&ServiceTls>,
    section: &str,
) -> Result<&'static str, String> {
    let Some(tls) = tls else {
        service.add_tcp(&address.to_string());
        return Ok("http");
    };
    let settings =
        crate::state::tls::build_service(tls).map_err(|e| format!("{section}.tls: {e}"))?;
    service.add_tls_with_settings(&address.to_string(), None, TlsSettings::from(settings));
    Ok("https")
}

/// Logs one line per listening address when the services start.
struct Announce(Vec<String>);

#[async_trait::async_trait]
impl pingora_core::services::background::BackgroundService for Announce {
    async fn start(&self, _shutdown: pingora_core::server::ShutdownWatch) {
        for line in &self.0 {
            log::info!("{line}");
        }
    }
}
