//! IBM's `plugin-cfg.xml` → tether: `ServerCluster`s become `websphere` clusters, each
//! `Route` (VirtualHostGroup × UriGroup → ServerCluster) one route per virtual host and URI.

use super::doc::{Doc, Listener, Route, Value};
use super::docroot::{DocumentRoot, IHS};
use super::names::Namer;
use super::routes;
use super::ws_cluster::{self, line, required, said};
use super::ImportError;
use roxmltree::Node;

const WEB: usize = 0;
const HTTPS: usize = 1;

fn why(element: &str) -> &'static str {
    match element {
        "Log" => "tether logs to stderr or server.error_log (RUST_LOG sets the level), requests to access_log",
        "RequestMetrics" => "tether's Prometheus metrics (metrics.address) and access_log",
        _ => "no tether equivalent",
    }
}

/// `<TrustedProxyGroup>`: the proxies in front of the plug-in whose word on the client
/// it took. tether's `trusted_proxies` does that job: the client is the right-most
/// `X-Forwarded-For` address that is not one of them. Names are left to resolve.
fn trusted(groups: &[Node], ls: &mut [Listener]) {
    let (mut addresses, mut names) = (Vec::new(), Vec::new());
    for group in groups {
        for p in group.children().filter(|n| n.has_tag_name("TrustedProxy")) {
            match p.attribute("Name").map(str::trim) {
                Some(a) if a.parse::<std::net::IpAddr>().is_ok() => addresses.push(a.to_string()),
                Some(a) if !a.is_empty() => names.push(a.to_string()),
                _ => {}
            }
        }
    }
    let from = groups
        .iter()
        .map(|g| format!("{} (line {})", said(*g), line(*g)))
        .collect::<Vec<_>>()
        .join(", ");
    for l in ls.iter_mut() {
        if !addresses.is_empty() {
            let list = addresses
                .iter()
                .map(|a| format!("\"{a}\""))
                .collect::<Vec<_>>();
            l.inner
                .push(format!("trusted_proxies: [{}]   # {from}", list.join(", ")));
        }
        if !names.is_empty() {
            l.notes.push(format!(
                "REVIEW: {from}: trusted proxies by name ({}): add their addresses to trusted_proxies",
                names.join(", ")
            ));
        }
    }
}

/// Where a virtual host's routes go: listeners and the route's host.
fn place(vhost: &str) -> (Vec<usize>, Option<String>) {
    let v = vhost.trim().to_ascii_lowercase();
    let port = v.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok());
    let host = (v != "*").then(|| v.clone());
    match port {
        Some(443) => (vec![HTTPS], host),
        Some(_) => (vec![WEB], host),
        None => (vec![WEB, HTTPS], host),
    }
}

fn groups<'a>(
    nodes: &[Node<'a, 'a>],
    child: &str,
    file: &str,
) -> Result<Vec<(String, Vec<Node<'a, 'a>>)>, ImportError> {
    nodes
        .iter()
        .map(|g| {
            let name = required(*g, "Name", file)?.to_string();
            let items = g.children().filter(|c| c.has_tag_name(child)).collect();
            Ok((name, items))
        })
        .collect()
}

fn find<'a, T>(
    list: &'a [(String, T)],
    name: &str,
    what: &str,
    r: Node,
    file: &str,
) -> Result<&'a T, ImportError> {
    list.iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| t)
        .ok_or_else(|| {
            ImportError::at(
                file,
                line(r),
                format!("<Route> names {what} `{name}`, which is not defined"),
            )
        })
}

/// Converts the text of a plugin-cfg.xml (`file` for messages); `document_root`: the web server's
/// document root (`--document-root`), which answered what no `Uri` matched.
pub fn convert(
    text: &str,
    file: &str,
    document_root: Option<&DocumentRoot>,
) -> Result<Doc, ImportError> {
    let xml = roxmltree::Document::parse(text).map_err(|e| {
        ImportError::at(
            file,
            e.pos().row as usize,
            format!("not well-formed XML: {e}"),
        )
    })?;
    let root = xml.root_element();
    if !root.has_tag_name("Config") {
        return Err(ImportError::at(
            file,
            line(root),
            format!(
                "the root element is <{}>, not <Config>: not a plugin-cfg.xml",
                root.tag_name().name()
            ),
        ));
    }
    let mut doc = Doc::default();
    for a in root.attributes() {
        let s = format!("Config {}=\"{}\"", a.name(), a.value());
        match (a.name(), a.value().parse::<u64>()) {
            ("RefreshInterval", Ok(v)) if v > 0 => {
                let ms = (v * 1000).clamp(100, 3_600_000);
                doc.top.set(
                    "watch_config",
                    Value::Dur(ms),
                    format!("{s}: reload when the file changes"),
                );
            }
            ("IgnoreDNSFailures", _) => doc.header.push(format!(
                "{s}: tether always does so: a server whose name does not resolve is held down, the config loads, and names are resolved again while it runs (resolver:)"
            )),
            ("TrustedProxyEnable", _) => doc.header.push(format!(
                "{s}: the <TrustedProxyGroup> is trusted_proxies when true"
            )),
            _ => doc.header.push(format!("{s}: no tether equivalent")),
        }
    }
    let (mut vhgs, mut ugs, mut scs, mut rts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut proxies = Vec::new();
    for child in root.children().filter(|n| n.is_element()) {
        match child.tag_name().name() {
            "TrustedProxyGroup" => proxies.push(child),
            "VirtualHostGroup" => vhgs.push(child),
            "UriGroup" => ugs.push(child),
            "ServerCluster" => scs.push(child),
            "Route" => rts.push(child),
            other => doc.header.push(format!(
                "{} (line {}): {}",
                said(child),
                line(child),
                why(other)
            )),
        }
    }
    let vhost_groups = groups(&vhgs, "VirtualHost", file)?;
    let uri_groups = groups(&ugs, "Uri", file)?;
    let mut namer = Namer::default();
    let mut names: Vec<(String, String)> = Vec::new();
    for sc in &scs {
        let raw = required(*sc, "Name", file)?;
        if names.iter().any(|(r, _)| r == raw) {
            return Err(ImportError::at(
                file,
                line(*sc),
                format!("a second ServerCluster named `{raw}`"),
            ));
        }
        let (name, note) = namer.name(raw);
        let mut c = ws_cluster::convert(*sc, &name, file)?;
        c.item.notes.extend(note);
        names.push((raw.to_string(), name));
        doc.clusters.push(c);
    }
    if doc.clusters.is_empty() {
        return Err(ImportError::file(file, "no <ServerCluster> to import"));
    }
    let mut ls = vec![
        Listener {
            name: "web".into(),
            address: "0.0.0.0:80".into(),
            ..Default::default()
        },
        Listener {
            name: "https".into(),
            address: "0.0.0.0:443".into(),
            commented: true,
            ..Default::default()
        },
    ];
    if root.attribute("TrustedProxyEnable") == Some("true") {
        trusted(&proxies, &mut ls);
    } else {
        for g in &proxies {
            doc.header.push(format!(
                "{} (line {}): not trusted (TrustedProxyEnable is not true), as the plug-in did",
                said(*g),
                line(*g)
            ));
        }
    }
    // (cluster, AffinityCookie, AffinityURLIdentifier) of every Uri routed to it.
    let mut affinity: Vec<(String, String, String)> = Vec::new();
    let mut tls_vhost = false;
    for r in &rts {
        let cluster = find(
            &names,
            required(*r, "ServerCluster", file)?,
            "ServerCluster",
            *r,
            file,
        )?
        .clone();
        // `PostSizeLimit` of the cluster, on each of its routes.
        let body_limit = doc
            .clusters
            .iter()
            .find(|c| matches!(c.item.get("name"), Some(Value::Str(n)) if *n == cluster))
            .and_then(|c| c.max_request_body.clone());
        let ug = required(*r, "UriGroup", file)?;
        let uris = find(&uri_groups, ug, "UriGroup", *r, file)?;
        let vhosts: Vec<String> = match r.attribute("VirtualHostGroup") {
            Some(g) => find(&vhost_groups, g, "VirtualHostGroup", *r, file)?
                .iter()
                .filter_map(|v| v.attribute("Name").map(str::to_string))
                .collect(),
            None => vec!["*".to_string()],
        };
        for uri in uris {
            let path = required(*uri, "Name", file)?;
            let source = format!("{file}:{} ({})", line(*uri), said(*uri));
            if !path.starts_with(['/', '*']) {
                ls[WEB].route_notes.push(format!(
                    "{source}: not a path pattern tether knows; left out"
                ));
                continue;
            }
            affinity.push((
                cluster.clone(),
                uri.attribute("AffinityCookie")
                    .unwrap_or("JSESSIONID")
                    .to_string(),
                uri.attribute("AffinityURLIdentifier")
                    .unwrap_or("jsessionid")
                    .to_string(),
            ));
            for v in &vhosts {
                let (listeners, host) = place(v);
                tls_vhost |= listeners == [HTTPS];
                for l in listeners {
                    let mut note = format!("{file}:{} VirtualHost {v}, Uri {path}", line(*uri));
                    if let Some((_, said)) = &body_limit {
                        note.push_str(&format!("; {said}"));
                    }
                    let route = Route {
                        host: host.clone(),
                        path: path.to_string(),
                        cluster: cluster.clone(),
                        exclude: false,
                        disabled: false,
                        note: Some(note),
                        max_request_body: body_limit.as_ref().map(|(n, _)| *n),
                    };
                    routes::add(&mut ls[l], route);
                }
            }
        }
    }
    for c in &mut doc.clusters {
        let name = match c.item.get("name") {
            Some(Value::Str(n)) => n.clone(),
            _ => continue,
        };
        let mine: Vec<&(String, String, String)> =
            affinity.iter().filter(|a| a.0 == name).collect();
        let Some(first) = mine.first() else {
            c.item
                .note("no <Route> sends to this cluster: only a route added here would use it");
            continue;
        };
        for (i, key, default) in [
            (1, "session_cookie", "JSESSIONID"),
            (2, "session_path", "jsessionid"),
        ] {
            let pick =
                |a: &(String, String, String)| if i == 1 { a.1.clone() } else { a.2.clone() };
            let v = pick(first);
            let attr = if i == 1 {
                "AffinityCookie"
            } else {
                "AffinityURLIdentifier"
            };
            if mine.iter().any(|a| pick(a) != v) {
                c.item.note(format!(
                    "its Uris have more than one {attr}; tether has one per cluster: `{v}`"
                ));
            }
            if !crate::config::is_token(&v) {
                c.item.note(format!(
                    "REVIEW: {attr} {} is not a name tether accepts; `{default}` is used",
                    super::doc::quoted(&v)
                ));
            } else if v != default {
                c.item.set(key, Value::Str(v), format!("Uri {attr}"));
            }
        }
    }
    let default = names[0].1.clone();
    routes::finish(&mut ls[WEB], &default, document_root, &IHS);
    if tls_vhost {
        let https = &mut ls[HTTPS];
        routes::finish(https, &default, document_root, &IHS);
        https.notes.push(
            "REVIEW: the https listener (virtual hosts on port 443) is commented out: uncomment it once tls.cert and tls.key name PEM files. IHS's KeyFile is a CMS .kdb: gskcapicmd -cert -export -db key.kdb -stashed -label LABEL -target site.p12 -target_type pkcs12, then openssl pkcs12 -in site.p12 -nokeys -out site.crt and -nocerts -nodes -out site.key".into(),
        );
        https.inner.push("tls:".into());
        https
            .inner
            .push("  cert: /etc/tether/site.crt   # chain, leaf first (PEM)".into());
        https.inner.push("  key: /etc/tether/site.key".into());
    } else {
        ls.truncate(1);
    }
    doc.listeners = ls;
    Ok(doc)
}
