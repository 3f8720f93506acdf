//! `conf/tether.yaml`, the commented example config, parses to exactly what it documents.

use std::net::SocketAddr;
use std::time::Duration;
use tether::config::*;

#[test]
fn the_example_config_parses_to_what_it_documents() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/conf/tether.yaml");
    let config = load(std::path::Path::new(path)).unwrap_or_else(|e| panic!("{e}"));
    let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
    let server = |name: &str, port: u16, weight: u32| Server {
        name: name.into(),
        address: addr(&format!("127.0.0.1:{port}")),
        route: name.into(),
        clone_id: None,
        weight,
        domain: None,
        redirect: None,
        backup: false,
        state: ServerState::Active,
        max_inflight: 0,
        host: None,
        unresolved: None,
    };
    let expected = Config {
        warnings: vec![],
        shared_state: None,
        resolver: Resolver {
            nameservers: vec![],
            interval: Duration::from_secs(30),
            timeout: Duration::from_secs(2),
        },
        server: ServerSettings {
            pid_file: "/tmp/tether.pid".into(),
            upgrade_sock: "/tmp/tether_upgrade.sock".into(),
            ..ServerSettings::default()
        },
        state_dir: Some("/tmp/tether-state".into()),
        admin: Some(Admin {
            address: addr("127.0.0.1:9900"),
            token: None,
            role_tokens: vec![],
            allow_unauthenticated: false,
            tls: None,
        }),
        metrics: Some(Metrics {
            address: addr("127.0.0.1:9901"),
            tls: None,
        }),
        access_log: Some(AccessLogSettings {
            path: "/tmp/tether-access.log".into(),
            mask_session_ids: true,
        }),
        watch_config: None,
        listeners: vec![Listener {
            name: "web".into(),
            address: addr("127.0.0.1:8080"),
            cluster: Some(0),
            routes: vec![],
            route_order: RouteOrder::Specific,
            error_pages: None,
            serve: None,
            compress: None,
            forwarded_headers: true,
            trusted_proxies: Vec::new(),
            proxy_protocol: None,
            plugins: vec![],
            limits: ListenerLimits::default(),
            client_limits: None,
            tls: None,
            h2c: false,
            // The suite runs on both engines (`TETHER_HTTP1=proxy`, the default of `http1`).
            http1: match std::env::var("TETHER_HTTP1").as_deref() {
                Ok("proxy") => Http1Path::Proxy,
                _ => Http1Path::Engine,
            },
            // And on both HTTP/2 front ends (`TETHER_HTTP2=proxy`).
            http2: match std::env::var("TETHER_HTTP2").as_deref() {
                Ok("proxy") => Http2Path::Proxy,
                _ => Http2Path::Engine,
            },
            http3: false,
            alt_svc_max_age: std::time::Duration::from_secs(24 * 3600),
            http3_retry_above: 1000,
            redirect_https: None,
        }],
        clusters: vec![Cluster {
            name: "shop".into(),
            session_style: SessionStyle::Tomcat,
            session_cookie: "JSESSIONID".into(),
            session_path: "jsessionid".into(),
            session_header: None,
            sticky: true,
            sticky_force: false,
            max_attempts: 3,
            balance: Balance::Weighted,
            recover_after: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(3),
            read_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            clone_separator: b':',
            private_headers: false,
            partition_table_max: DEFAULT_PARTITION_TABLE_MAX,
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            session_table_max: DEFAULT_SESSION_TABLE_MAX,
            drain_rescue: false,
            slow_start: Duration::ZERO,
            outlier: None,
            health_check: Some(HealthCheck {
                kind: HealthCheckKind::Http,
                path: "/health".into(),
                host: None,
                expect: (200, 399),
                interval: Duration::from_secs(5),
                timeout: Duration::from_secs(1),
                rise: 2,
                fall: 2,
            }),
            fail_on_status: vec![FailOn {
                status: 503,
                mark_down: true,
            }],
            plugins: vec![],
            tls: None,
            ajp: None,
            ssl_headers: None,
            queue: tether::config::Queue {
                length: 1000,
                timeout: Duration::from_secs(5),
            },
            retry: tether::config::Retry::default(),
            max_inflight_per: Default::default(),
            error_pages: None,
            replace_server_errors: 0,
            servers: vec![
                server("n1", 8081, 1),
                Server {
                    domain: Some("rack1".into()),
                    ..server("n2", 8082, 2)
                },
                Server {
                    domain: Some("rack1".into()),
                    ..server("n3", 8083, 2)
                },
                Server {
                    redirect: Some(0),
                    backup: true,
                    ..server("n4", 8084, 1)
                },
                Server {
                    state: ServerState::Draining,
                    ..server("n5", 8085, 1)
                },
            ],
        }],
    };
    assert_eq!(config, expected);
}
