//! mod_jk workers → tether clusters: load balancer workers become clusters, their members
//! servers; a worker used on its own (in `worker.list` or mounted) a one-server cluster.

use super::doc::{Cluster, Doc, Item, Value};
use super::docroot::DocumentRoot;
use super::jk_model::{Member, Target};
use super::jk_mounts::{self, From, Mounts, Refused};
use super::jk_props::{members_of, said, Worker, Workers};
use super::jk_settings as settings;
use super::jk_timeouts::Timeouts;
use super::names::{Claims, Namer};
use super::{jk_routes, ImportError};
use std::collections::HashMap;

/// Directives of a member that become server fields.
const MEMBER: &[&str] = &[
    "type",
    "host",
    "port",
    "route",
    "jvm_route",
    "lbfactor",
    "domain",
    "redirect",
    "activation",
    "disabled",
    "stopped",
    "distance",
    "reference",
    "connection_pool_size",
];

fn kind(w: Option<&Worker>) -> String {
    w.and_then(|w| w.get("type"))
        .map(|p| p.value.to_ascii_lowercase())
        .unwrap_or_else(|| "ajp13".into())
}

/// Builds the document from parsed workers and mounts (`workers_file` for notes); `root`:
/// `--document-root`.
pub fn convert(
    w: &Workers,
    mut mounts: Mounts,
    workers_file: &str,
    root: Option<&DocumentRoot>,
) -> Result<Doc, ImportError> {
    let mut doc = Doc::default();
    // `worker.X.mount`: the lowest-precedence source of mounts.
    for x in &w.workers {
        if let Some(p) = x.get("mount") {
            for pattern in p.value.split_whitespace() {
                let source = format!("{workers_file}:{}", p.line);
                match jk_mounts::rule(pattern, &x.name, None, &source, From::WorkerMount) {
                    Ok(rules) => mounts.mounts.extend(rules),
                    Err(Refused::ByModJk(why)) => mounts.notes.push(format!("{source}: {why}")),
                    Err(Refused::Malformed(why)) => {
                        return Err(ImportError::at(workers_file, p.line, why))
                    }
                }
            }
        }
    }
    let listed: Vec<&str> = w.list.iter().map(|(n, _)| n.as_str()).collect();
    let mounted: Vec<&str> = mounts.mounts.iter().map(|m| m.worker.as_str()).collect();
    let members: Vec<String> = w
        .workers
        .iter()
        .filter(|x| kind(Some(x)) == "lb")
        .flat_map(members_of)
        .collect();
    let template = |name: &str| {
        w.referenced.iter().any(|r| r == name)
            && !listed.contains(&name)
            && !mounted.contains(&name)
            && !members.iter().any(|m| m == name)
    };
    let mut namer = Namer::default();
    let mut targets: HashMap<String, Target> = HashMap::new();
    // Load balancers first, in the file's order, then workers used on their own.
    let mut order: Vec<(&str, bool)> = Vec::new();
    for x in &w.workers {
        if kind(Some(x)) == "lb" && !template(&x.name) {
            order.push((&x.name, true));
        }
    }
    for name in listed.iter().chain(&mounted) {
        let k = kind(w.worker(name));
        let known = w.worker(name).is_some() || listed.contains(name);
        if k != "lb"
            && k != "status"
            && known
            && !template(name)
            && !order.iter().any(|o| o.0 == *name)
        {
            order.push((name, false));
        }
    }
    for (name, lb) in order {
        let (cname, note) = namer.name(name);
        let mut c = if lb {
            balancer(w, w.worker(name).unwrap(), &mut doc.header, workers_file)?
        } else {
            single(w, name, workers_file)?
        };
        c.item.fields.insert(0, field_name(&cname));
        if let Some(n) = note {
            c.item.notes.push(n);
        }
        if !listed.contains(&name) && !mounted.contains(&name) {
            c.item.notes.push(format!(
                "`{name}` is not in worker.list: mod_jk could not mount it (nor can a route here until one names it)"
            ));
        }
        targets.insert(name.to_string(), Target::Cluster(cname));
        doc.clusters.push(c);
    }
    for x in &w.workers {
        match kind(Some(x)).as_str() {
            "status" => {
                targets.insert(x.name.clone(), Target::Status);
                let props: Vec<String> = x.props.iter().map(|p| format!("{}={}", p.directive, p.value)).collect();
                doc.header.push(format!(
                    "status worker `{}` ({}): tether's admin API does this; set admin.address (GET /status, drain, stop, activate, weight)",
                    x.name,
                    props.join(", ")
                ));
            }
            _ if template(&x.name) => doc.footer.push(format!(
                "worker `{}` (line {}) is a template: `reference` copied its properties into the workers that name it",
                x.name, x.line
            )),
            _ if !targets.contains_key(&x.name) && !members.contains(&x.name) => doc.footer.push(format!(
                "worker `{}` (line {}) is neither in worker.list, a load balancer member, nor mounted: not imported",
                x.name, x.line
            )),
            _ => {}
        }
    }
    if doc.clusters.is_empty() {
        return Err(ImportError::file(
            workers_file,
            "no worker to import: no load balancer (type=lb) and no worker in worker.list or mounted",
        ));
    }
    for (g, value, line) in &w.globals {
        doc.header.push(format!(
            "worker.{g}={value} (line {line}): no tether equivalent (tether recovers a server by a probe request after recover_after)"
        ));
    }
    if !w.vars.is_empty() {
        let vars: Vec<String> = w.vars.iter().map(|(k, v, _)| format!("{k}={v}")).collect();
        doc.header.push(format!(
            "variables (substituted where used; no tether equivalent): {}",
            vars.join(", ")
        ));
    }
    doc.header.extend(w.notes.iter().cloned());
    // mod_jk serves only the workers of worker.list: the first of them that is a cluster.
    let default = w
        .list
        .iter()
        .find_map(|(n, _)| match targets.get(n) {
            Some(Target::Cluster(c)) => Some(c.clone()),
            _ => None,
        })
        .or_else(|| targets_first(&doc))
        .unwrap_or_default();
    jk_routes::listeners(&mut doc, &mounts, &targets, &default, root);
    Ok(doc)
}

fn targets_first(doc: &Doc) -> Option<String> {
    match doc.clusters.first()?.item.get("name")? {
        Value::Str(s) => Some(s.clone()),
        _ => None,
    }
}

fn field_name(name: &str) -> super::doc::Field {
    super::doc::Field {
        key: "name",
        value: Value::Str(name.to_string()),
        note: None,
    }
}

/// A load balancer worker and its members.
fn balancer(
    w: &Workers,
    lb: &Worker,
    header: &mut Vec<String>,
    file: &str,
) -> Result<Cluster, ImportError> {
    let mut c = Cluster::default();
    c.item.note(format!(
        "mod_jk load balancer `{}` (line {})",
        lb.name, lb.line
    ));
    let names = members_of(lb);
    if names.is_empty() {
        header.push(format!(
            "load balancer `{}` has no balance_workers: a server is needed, see its cluster",
            lb.name
        ));
    }
    let mut namer = Namer::default();
    let mut timeouts = Timeouts::default();
    settings::balancer(lb, &mut c, &mut timeouts);
    if let Some(twice) = names
        .iter()
        .enumerate()
        .find(|(i, m)| names[..*i].contains(m))
    {
        let line = ["balance_workers", "balanced_workers"]
            .iter()
            .filter_map(|d| lb.get(d))
            .map(|p| p.line)
            .max()
            .unwrap_or(lb.line);
        return Err(ImportError::at(
            file,
            line,
            format!(
                "load balancer `{}` lists worker `{}` twice",
                lb.name, twice.1
            ),
        ));
    }
    let mut servers = Vec::new();
    // tether takes each address and each route once in a cluster (as the config's check
    // does).
    let (mut addresses, mut routes) = (Claims::default(), Claims::default());
    for m in &names {
        let mw = w.worker(m);
        let k = kind(mw);
        if k == "lb" || k == "status" {
            c.item.note(format!(
                "member `{m}` is a {k} worker, not a server: left out"
            ));
            continue;
        }
        let (name, note) = namer.name(m);
        let mut s = server(m, mw, &name, &k, file)?;
        if let Some(Value::Str(address)) = s.item.get("address") {
            if let Some(first) = addresses.claim(address, m) {
                let line = mw
                    .and_then(|w| w.get("port").or(w.get("host")).map(|p| p.line))
                    .unwrap_or(lb.line);
                return Err(ImportError::at(
                    file,
                    line,
                    format!(
                        "load balancer `{}`: workers `{first}` and `{m}` are both at {address}; \
                         tether takes each server address once in a cluster",
                        lb.name
                    ),
                ));
            }
        }
        if let Some(first) = routes.claim(&s.route, m) {
            let line = mw
                .and_then(|w| w.get("route").or(w.get("jvm_route")).map(|p| p.line))
                .or(mw.map(|w| w.line))
                .unwrap_or(lb.line);
            return Err(ImportError::at(
                file,
                line,
                format!(
                    "load balancer `{}`: workers `{first}` and `{m}` both have route `{}`; \
                     a session's route must name one server",
                    lb.name, s.route
                ),
            ));
        }
        if let Some(n) = note {
            s.item.notes.insert(0, n);
        }
        if let Some(mw) = mw {
            timeouts.add(mw);
        }
        servers.push(s);
    }
    if servers.is_empty() {
        c.item.note(format!(
            "REVIEW: `{}` has no usable member; a placeholder server keeps the file valid",
            lb.name
        ));
        servers.push(placeholder());
    }
    settings::backups(&mut servers);
    settings::redirects(&mut servers);
    c.servers = servers.into_iter().map(|s| s.item).collect();
    let members: Vec<_> = names
        .iter()
        .map(|m| (m.as_str(), w.worker(m), kind(w.worker(m))))
        .filter(|m| m.2 != "lb" && m.2 != "status")
        .collect();
    if let Some(ajp) = super::jk_ajp::section(&members, &mut c.item.notes) {
        c.sections.push(("ajp", ajp));
    }
    timeouts.apply(&mut c);
    Ok(c)
}

fn placeholder() -> Member {
    let mut item = Item::default();
    item.set("name", Value::Str("placeholder".into()), None);
    item.set("address", Value::Str("127.0.0.1:8080".into()), None);
    Member {
        item,
        route: "placeholder".into(),
        redirect: None,
        distance: 0,
        distance_said: None,
    }
}

/// A worker mounted on its own: a cluster of one server.
fn single(w: &Workers, name: &str, file: &str) -> Result<Cluster, ImportError> {
    let mut c = Cluster::default();
    let mw = w.worker(name);
    c.item.note(format!(
        "mod_jk worker `{name}` used on its own (no load balancer)"
    ));
    let mut timeouts = Timeouts::default();
    if let Some(mw) = mw {
        timeouts.add(mw);
    }
    let (sname, _) = Namer::default().name(name);
    c.servers = vec![server(name, mw, &sname, &kind(mw), file)?.item];
    if let Some(ajp) = super::jk_ajp::section(&[(name, mw, kind(mw))], &mut c.item.notes) {
        c.sections.push(("ajp", ajp));
    }
    timeouts.apply(&mut c);
    Ok(c)
}

/// A member worker (`mw` None: not defined in the file, mod_jk's defaults).
fn server(
    raw: &str,
    mw: Option<&Worker>,
    name: &str,
    kind: &str,
    file: &str,
) -> Result<Member, ImportError> {
    let mut s = Item::default();
    s.set("name", Value::Str(name.to_string()), None);
    let get = |d: &str| mw.and_then(|x| x.get(d));
    let ajp = kind.starts_with("ajp");
    let default_port = if kind == "ajp14" { "8011" } else { "8009" };
    if mw.is_none() {
        s.note(format!(
            "REVIEW: worker `{raw}` is not defined in the file: mod_jk's defaults (localhost:8009, AJP)"
        ));
    }
    if !ajp {
        s.note(format!(
            "worker.{raw}.type={kind}: not a protocol tether speaks; imported as an HTTP server"
        ));
    }
    let (host, port) = (get("host"), get("port"));
    let (address, port) = settings::address(
        host.map(|p| p.value.as_str()).unwrap_or("localhost"),
        port.map(|p| p.value.as_str()).unwrap_or(default_port),
    )
    .map_err(|m| {
        let line = port.or(host).map(|p| p.line).unwrap_or(0);
        ImportError::at(file, line, format!("worker `{raw}`: {m}"))
    })?;
    let note = if ajp {
        format!("AJP port {port} (the cluster's `ajp:`)")
    } else {
        format!("REVIEW: was port {port} of a {kind} worker")
    };
    s.set("address", Value::Str(address), Some(note));
    let route = get("route").or(get("jvm_route"));
    let route_text = route
        .map(|p| p.value.clone())
        .unwrap_or_else(|| raw.to_string());
    if !crate::config::usable_route(&route_text) {
        // mod_jk would put it in session ids, where `;`, `,` or a space ends the id, so no
        // session could find its way back; tether refuses such a route.
        let line = route.map(|p| p.line).or(mw.map(|w| w.line));
        let message = format!(
            "worker `{raw}`: route `{route_text}` is not one tether can use (empty, or has `;`, `,` or a space)"
        );
        return Err(match line {
            Some(line) => ImportError::at(file, line, message),
            None => ImportError::file(file, message),
        });
    }
    match route {
        Some(p) => s.set("route", Value::Str(p.value.clone()), Some(said(raw, p))),
        None if name != raw => s.set(
            "route",
            Value::Str(raw.to_string()),
            Some("the worker's name, mod_jk's default route".to_string()),
        ),
        None => {}
    }
    let (distance, distance_said) = settings::member(raw, mw, &mut s, &route_text);
    let redirect = get("redirect").map(|p| (p.value.clone(), said(raw, p)));
    if let Some(mw) = mw {
        for p in &mw.props {
            if !MEMBER.contains(&p.directive.as_str())
                && !settings::CLUSTER_LEVEL.contains(&p.directive.as_str())
            {
                s.note(format!(
                    "{}: {}",
                    said(raw, p),
                    settings::no_equivalent(&p.directive)
                ));
            }
        }
    }
    Ok(Member {
        item: s,
        route: route_text,
        redirect,
        distance,
        distance_said,
    })
}
