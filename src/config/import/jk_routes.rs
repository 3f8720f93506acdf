//! mod_jk mounts → the listeners' routes: `web` on port 80, and an https listener,
//! commented out, when a `<VirtualHost>` spoke TLS.

use super::doc::{scalar_str, Doc, Listener, Route};
use super::docroot::{DocumentRoot, APACHE};
use super::jk_docroot;
use super::jk_model::Target;
use super::jk_mounts::{Mount, Mounts};
use super::routes;
use std::collections::HashMap;

const WEB: usize = 0;
const HTTPS: usize = 1;

/// Where a mount applies: (listener, host) pairs.
fn placements(m: &Mount, mounts: &Mounts) -> Vec<(usize, Option<String>)> {
    let hosts = |v: usize| -> Vec<(usize, Option<String>)> {
        let vh = &mounts.vhosts[v];
        let l = if vh.tls { HTTPS } else { WEB };
        if vh.names.is_empty() {
            vec![(l, None)]
        } else {
            vh.names.iter().map(|n| (l, Some(n.clone()))).collect()
        }
    };
    match m.vhost {
        Some(v) => hosts(v),
        None => {
            let mut out = vec![(WEB, None)];
            for (v, vh) in mounts.vhosts.iter().enumerate() {
                if vh.tls && (vh.copy || mounts.copy_all) {
                    out.extend(hosts(v));
                }
            }
            out
        }
    }
}

fn note(m: &Mount) -> String {
    let others: Vec<&str> = extensions(m)
        .filter(|e| server_errors(e).is_none())
        .collect();
    match others.is_empty() {
        true => m.source.clone(),
        false => format!(
            "{}; rule extensions `{}`: no tether equivalent",
            m.source,
            others.join(";")
        ),
    }
}

/// A mount's rule extensions (`reply_timeout=60000`, ...).
fn extensions(m: &Mount) -> impl Iterator<Item = &str> {
    m.extensions
        .iter()
        .flat_map(|e| e.split(';'))
        .map(str::trim)
        .filter(|e| !e.is_empty())
}

/// `use_server_errors=N`'s status.
fn server_errors(extension: &str) -> Option<i64> {
    let (key, value) = extension.split_once('=')?;
    (key.trim() == "use_server_errors")
        .then(|| value.trim().parse().ok())
        .flatten()
}

/// mod_jk's `use_server_errors=N` on a mount: the web server's error page for the
/// server's answers from N up, tether's `replace_server_errors` on the mount's cluster.
fn replace_server_errors(doc: &mut Doc, m: &Mount, cluster: &str) {
    let Some(n) = extensions(m).find_map(server_errors) else {
        return;
    };
    let named = |c: &&mut super::doc::Cluster| matches!(c.item.get("name"), Some(super::doc::Value::Str(s)) if s == cluster);
    if let Some(c) = doc.clusters.iter_mut().find(named) {
        let said = format!("{}: use_server_errors={n}", m.source);
        match n {
            400..=599 => c.item.set(
                "replace_server_errors",
                super::doc::Value::Num(n),
                format!("{said}: the server's error answers get tether's page (error_pages)"),
            ),
            _ => c
                .item
                .note(format!("{said}: not a status 400-599, left out")),
        }
    }
}

/// The mounts mod_jk keeps: a pattern defined again in the same kind of source (same
/// virtual host, same `!` and `-`) replaces the earlier rule, whose worker is then said in
/// a note. Sorted by source (`uriworkermap.properties`, `JkMount`, `worker.X.mount`), each in
/// its order: the order in which equal patterns win.
fn kept(mounts: &Mounts, notes: &mut Vec<String>) -> Vec<Mount> {
    let key = |m: &Mount| (m.from, m.vhost, m.exclude, m.disabled, m.pattern.clone());
    let mut out: Vec<Mount> = Vec::new();
    for m in &mounts.mounts {
        match out.iter().position(|o| key(o) == key(m)) {
            Some(at) => {
                let old = std::mem::replace(&mut out[at], m.clone());
                if old.worker != m.worker {
                    notes.push(format!(
                        "{}: `{}={}` is defined again at {} (`={}`), which replaces it in mod_jk",
                        old.source, old.pattern, old.worker, m.source, m.worker
                    ));
                }
            }
            None => out.push(m.clone()),
        }
    }
    out.sort_by_key(|m| m.from);
    out
}

/// Adds the listeners, with a route for each mount, to `doc`; `default`: the cluster of a
/// listener that no mount sends anything to; `root`: `--document-root`.
pub fn listeners(
    doc: &mut Doc,
    mounts: &Mounts,
    targets: &HashMap<String, Target>,
    default: &str,
    root: Option<&DocumentRoot>,
) {
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
    let kept = kept(mounts, &mut ls[WEB].route_notes);
    let said = |m: &Mount| {
        let bang = if m.exclude { "!" } else { "" };
        format!("{}: {bang}{}={}", m.source, m.pattern, m.worker)
    };
    for m in kept.iter().filter(|m| !m.exclude) {
        match targets.get(&m.worker) {
            Some(Target::Cluster(c)) => {
                replace_server_errors(doc, m, c);
                for (l, host) in placements(m, mounts) {
                    let r = Route {
                        host,
                        path: m.pattern.clone(),
                        cluster: c.clone(),
                        exclude: false,
                        disabled: m.disabled,
                        note: Some(note(m)),
                        max_request_body: None,
                    };
                    routes::add(&mut ls[l], r);
                }
            }
            Some(Target::Status) => ls[WEB].route_notes.push(format!(
                "{}: the status worker; tether's admin API (admin.address) does this, not a route",
                said(m)
            )),
            _ => ls[WEB].route_notes.push(format!(
                "{}: no such worker in workers.properties; not imported",
                said(m)
            )),
        }
    }
    for m in kept.iter().filter(|m| m.exclude) {
        for (l, host) in placements(m, mounts) {
            let clusters: Vec<String> = match targets.get(&m.worker) {
                _ if m.worker == "*" => routes::mounted(&ls[l]),
                Some(Target::Cluster(c)) => vec![c.clone()],
                _ => {
                    ls[l].route_notes.push(format!(
                        "{}: excludes from no imported cluster; not imported",
                        said(m)
                    ));
                    continue;
                }
            };
            for c in clusters {
                let r = Route {
                    host: host.clone(),
                    path: m.pattern.clone(),
                    cluster: c,
                    exclude: true,
                    disabled: m.disabled,
                    note: Some(note(m)),
                    max_request_body: None,
                };
                routes::add_exclusion(&mut ls[l], r, &said(m));
            }
        }
    }
    if !mounts.vhosts.is_empty() {
        let global = mounts.mounts.iter().any(|m| m.vhost.is_none());
        if global && !mounts.copy_all && mounts.vhosts.iter().any(|v| !v.copy) {
            ls[WEB].notes.push(
                "JkMounts outside <VirtualHost> applied in Apache only to the main server and to virtual hosts with JkMountCopy On; routes without host apply to every host".into(),
            );
        }
    }
    for l in ls.iter_mut() {
        l.route_order = Some("mod_jk");
        if let Some((n, source)) = &mounts.body_limit {
            l.inner.push(format!(
                "limits: {{ max_request_body: {n} }}   # {source}: LimitRequestBody{}",
                if *n == 0 { " 0: no bound" } else { "" }
            ));
        }
    }
    let web_root = jk_docroot::root(mounts, false, root, &mut ls[WEB].notes);
    routes::finish(&mut ls[WEB], default, web_root.as_ref(), &APACHE);
    let tls_vhosts: Vec<_> = mounts.vhosts.iter().filter(|v| v.tls).collect();
    if let Some(v) = tls_vhosts.first() {
        let https = &mut ls[HTTPS];
        let https_root = jk_docroot::root(mounts, true, root, &mut https.notes);
        routes::finish(https, default, https_root.as_ref(), &APACHE);
        https.notes.push(format!(
            "REVIEW: the https listener is commented out: uncomment it once tls.cert and tls.key name PEM files tether can read (from <VirtualHost {}> at {})",
            v.address, v.source
        ));
        https.inner.push("tls:".into());
        https.inner.push(format!(
            "  cert: {}   # Apache's SSLCertificateFile (chain, leaf first, PEM)",
            scalar_str(v.cert.as_deref().unwrap_or("/etc/tether/site.crt"))
        ));
        https.inner.push(format!(
            "  key: {}   # Apache's SSLCertificateKeyFile",
            scalar_str(v.key.as_deref().unwrap_or("/etc/tether/site.key"))
        ));
    } else {
        ls.truncate(1);
    }
    doc.header.extend(mounts.notes.iter().cloned());
    doc.listeners = ls;
}
