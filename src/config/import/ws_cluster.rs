//! A plug-in `<ServerCluster>` → a `websphere` cluster: servers with clone ids, weights,
//! backups, the transport (http, or https with `tls`), timeouts, retry interval.

use super::doc::{Cluster, Item, Value};
use super::names::{Claims, Namer};
use super::ImportError;
use roxmltree::Node;
use std::net::IpAddr;

/// `<Element A="x" B="y">` as a note says it.
pub fn said(n: Node) -> String {
    let attrs: Vec<String> = n
        .attributes()
        .map(|a| format!("{}=\"{}\"", a.name(), a.value()))
        .collect();
    if attrs.is_empty() {
        format!("<{}>", n.tag_name().name())
    } else {
        format!("<{} {}>", n.tag_name().name(), attrs.join(" "))
    }
}

pub fn line(n: Node) -> usize {
    n.document().text_pos_at(n.range().start).row as usize
}

fn attr_said(n: Node, a: &str) -> String {
    format!(
        "{} {a}=\"{}\"",
        n.tag_name().name(),
        n.attribute(a).unwrap_or("")
    )
}

pub fn required<'a>(n: Node<'a, 'a>, a: &str, file: &str) -> Result<&'a str, ImportError> {
    n.attribute(a).ok_or_else(|| {
        ImportError::at(
            file,
            line(n),
            format!("<{}> has no {a} attribute", n.tag_name().name()),
        )
    })
}

fn why(attr: &str) -> &'static str {
    match attr {
        "IgnoreAffinityRequests" => {
            "tether's weighted balancing counts only requests without affinity (as with true)"
        }
        "RemoveSpecialHeaders" => "tether always removes $WS* headers that clients send",
        "PostBufferSize" => {
            "tether reads bodies up to listeners[].limits.request_buffer (at most 64 KiB) before connecting"
        }
        "GetDWLMTable" => "tether learns partition tables from $WSPT on every response",
        "MaxConnections" => "not a number",
        _ => "no tether equivalent",
    }
}

struct Transport {
    protocol: String,
    address: String,
    host_is_ip: bool,
    port: u16,
    props: Vec<String>,
}

fn transport(t: Node, file: &str) -> Result<Transport, ImportError> {
    let host = required(t, "Hostname", file)?;
    let port = required(t, "Port", file)?;
    let port: u16 = port.parse().map_err(|_| {
        ImportError::at(
            file,
            line(t),
            format!("<Transport Port=\"{port}\"> is not a port"),
        )
    })?;
    let ip = host.trim_matches(['[', ']']).parse::<IpAddr>();
    let address = match ip {
        Ok(IpAddr::V6(_)) => format!("[{}]:{port}", host.trim_matches(['[', ']'])),
        _ => format!("{host}:{port}"),
    };
    let props = t
        .children()
        .filter(|c| c.has_tag_name("Property"))
        .map(|p| {
            format!(
                "{}={}",
                p.attribute("Name").unwrap_or(""),
                p.attribute("Value").unwrap_or("")
            )
        })
        .collect();
    Ok(Transport {
        protocol: t
            .attribute("Protocol")
            .unwrap_or("http")
            .to_ascii_lowercase(),
        address,
        host_is_ip: ip.is_ok(),
        port,
        props,
    })
}

/// Largest value of a per-server timeout, said in a note.
#[derive(Default)]
struct Largest {
    values: Vec<(u64, String)>,
}

impl Largest {
    fn set(self, item: &mut Item, key: &'static str, hi: u64) {
        let Some(max) = self.values.iter().map(|v| v.0).max() else {
            return;
        };
        let mut said: Vec<String> = self.values.iter().map(|v| v.1.clone()).collect();
        said.dedup();
        let mut note = said.join("; ");
        if self.values.iter().any(|v| v.0 != max) {
            note.push_str("; tether has one value per cluster: the largest");
        }
        item.set(key, Value::Dur(max.min(hi)), note);
    }
}

/// Converts one `<ServerCluster>`; `name` is its tether name.
pub fn convert(sc: Node, name: &str, file: &str) -> Result<Cluster, ImportError> {
    let raw = required(sc, "Name", file)?;
    let mut c = Cluster::default();
    c.item.note(format!(
        "WebSphere ServerCluster `{raw}` (line {})",
        line(sc)
    ));
    c.item.set("name", Value::Str(name.to_string()), None);
    let mut ws = Item::default();
    for a in sc.attributes() {
        let s = attr_said(sc, a.name());
        match a.name() {
            // Read with the servers' ServerIOTimeout (`timeout_retries`).
            "Name" | "ServerIOTimeoutRetry" => {}
            // Bytes; -1 (the default) or 0: no bound.
            "PostSizeLimit" => match a.value().parse::<i64>() {
                Ok(v) if v > 0 => c.max_request_body = Some((v as u64, format!("{s}: the largest request body (max_request_body)"))),
                Ok(_) => c.item.note(format!("{s}: no bound, as tether's default")),
                Err(_) => c.item.note(format!("{s}: not a number, left out")),
            },
            "LoadBalance" if a.value().eq_ignore_ascii_case("round robin") => {
                c.item.set("balance", Value::Str("weighted".into()), s)
            }
            "LoadBalance" => c.item.note(format!(
                "{s}: tether balances new sessions by weight (weighted, the plug-in's Round Robin) or by requests in flight; weighted is used"
            )),
            "RetryInterval" => match a.value().parse::<i64>() {
                Ok(v) => c.item.set("recover_after", Value::Dur(v.clamp(0, 3600) as u64 * 1000), s),
                Err(_) => c.item.note(format!("{s}: not a number, left out")),
            },
            "CloneSeparatorChange" if a.value() == "true" => {
                ws.set("clone_separator", Value::Str("+".into()), s)
            }
            "CloneSeparatorChange" => c.item.note(format!("{s}: clone ids separated by `:`, tether's default")),
            n => c.item.note(format!("{s}: {}", why(n))),
        }
    }
    // Servers, then which are backups.
    let mut servers = Vec::new();
    let mut backups: Vec<String> = Vec::new();
    for child in sc.children().filter(|n| n.is_element()) {
        match child.tag_name().name() {
            "Server" => servers.push(child),
            "BackupServers" => backups.extend(
                child
                    .children()
                    .filter(|s| s.has_tag_name("Server"))
                    .filter_map(|s| s.attribute("Name").map(str::to_string)),
            ),
            "PrimaryServers" => {}
            _ => c.item.note(format!(
                "{} (line {}): {}",
                said(child),
                line(child),
                why("")
            )),
        }
    }
    if servers.is_empty() {
        return Err(ImportError::at(
            file,
            line(sc),
            format!("ServerCluster `{raw}` has no <Server>"),
        ));
    }
    let mut transports = Vec::new();
    for s in &servers {
        let ts: Vec<Transport> = s
            .children()
            .filter(|t| t.has_tag_name("Transport"))
            .map(|t| transport(t, file))
            .collect::<Result<_, _>>()?;
        if ts.is_empty() {
            return Err(ImportError::at(
                file,
                line(*s),
                "<Server> has no <Transport>",
            ));
        }
        transports.push(ts);
    }
    // One protocol per cluster: https when every server has it (the plug-in used it for
    // requests that came over https), else http.
    let https = transports
        .iter()
        .all(|ts| ts.iter().any(|t| t.protocol == "https"));
    let want = if https { "https" } else { "http" };
    let mut names = Namer::default();
    let (mut connect, mut read) = (Largest::default(), Largest::default());
    // Servers whose timed-out requests the plug-in sent to another server.
    let mut timing_out: Vec<String> = Vec::new();
    let mut all_clones = true;
    let mut keyrings: Vec<String> = Vec::new();
    let mut by_ip = false;
    // tether takes each address and clone id once in a cluster (as the config's check does).
    let (mut addresses, mut clone_ids) = (Claims::default(), Claims::default());
    for (s, ts) in servers.iter().zip(&transports) {
        let mut item = Item::default();
        let raw_name = required(*s, "Name", file)?;
        let (sname, note) = names.name(raw_name);
        item.note(format!("Server `{raw_name}` (line {})", line(*s)));
        if let Some(n) = note {
            item.note(n);
        }
        item.set("name", Value::Str(sname), None);
        let t = ts.iter().find(|t| t.protocol == want).unwrap_or(&ts[0]);
        let mut tnote = format!("Transport Protocol=\"{}\"", t.protocol);
        if t.protocol != want {
            tnote = format!(
                "REVIEW: only a {} transport, but the cluster speaks {want}",
                t.protocol
            );
        }
        for other in ts
            .iter()
            .filter(|o| o.address != t.address || o.protocol != t.protocol)
        {
            tnote.push_str(&format!("; also {} on port {}", other.protocol, other.port));
        }
        if let Some(first) = addresses.claim(&t.address, raw_name) {
            return Err(ImportError::at(
                file,
                line(*s),
                format!(
                    "Servers `{first}` and `{raw_name}` are both at {}; tether takes each server address once in a cluster",
                    t.address
                ),
            ));
        }
        item.set("address", Value::Str(t.address.clone()), tnote);
        by_ip |= t.host_is_ip && t.protocol == "https";
        for p in &t.props {
            if !keyrings.contains(p) {
                keyrings.push(p.clone());
            }
        }
        match s.attribute("CloneID") {
            Some(id) if !crate::config::usable_clone_id(id) => {
                return Err(ImportError::at(
                    file,
                    line(*s),
                    format!(
                        "Server `{raw_name}`: CloneID `{id}` is not a clone id tether can use \
                         (empty, or has `:`, `+`, `,` or `=`, which separate clone ids in session ids and $WSPT)"
                    ),
                ))
            }
            Some(id) => {
                if let Some(first) = clone_ids.claim(id, raw_name) {
                    return Err(ImportError::at(
                        file,
                        line(*s),
                        format!("Servers `{first}` and `{raw_name}` both have CloneID `{id}`; a session's clone id must name one server"),
                    ));
                }
                item.set("clone_id", Value::Str(id.to_string()), None)
            }
            None => all_clones = false,
        }
        if backups.iter().any(|b| b == raw_name) {
            item.set(
                "backup",
                Value::Bool(true),
                Some("in <BackupServers>".to_string()),
            );
        }
        for a in s.attributes() {
            let said = attr_said(*s, a.name());
            let num = a.value().parse::<i64>();
            match (a.name(), num) {
                ("Name" | "CloneID", _) => {}
                ("LoadBalanceWeight", Ok(0)) => {
                    item.set("weight", Value::Num(1), said.clone());
                    item.set("state", Value::Str("draining".into()), format!("{said}: no new sessions, only its own"));
                }
                ("LoadBalanceWeight", Ok(w)) => {
                    let b = w.clamp(1, 1000);
                    let note = if b == w { said } else { format!("{said}: tether's weight is 1-1000") };
                    item.set("weight", Value::Num(b), note);
                }
                ("ConnectTimeout", Ok(v)) if v > 0 => connect.values.push((v as u64 * 1000, said)),
                ("ConnectTimeout", Ok(_)) => item.note(format!("{said}: the system's connect timeout; tether's default (3s) is kept")),
                ("ServerIOTimeout", Ok(v)) if v > 0 => {
                    timing_out.push(raw_name.to_string());
                    read.values.push((
                        v as u64 * 1000,
                        format!("{said} (positive: the plug-in kept the server up and sent the request to another server, as tether does with retry_on: response_timeout)"),
                    ))
                }
                ("ServerIOTimeout", Ok(v)) if v < 0 => {
                    timing_out.push(raw_name.to_string());
                    read.values.push((
                        v.unsigned_abs() * 1000,
                        format!("{said} (negative: the plug-in marked the server down after a timeout; tether sends the request on and keeps the server up, and outlier.consecutive_errors ejects one that keeps failing)"),
                    ))
                }
                ("MaxConnections", Ok(v)) if v > 0 => {
                    let b = v.min(100_000);
                    item.set("max_inflight", Value::Num(b), said.clone());
                    item.note(format!(
                        "REVIEW: {said}: the plug-in's bound is per web server process and it skipped a full server; \
                         tether's max_inflight is per tether instance, and a session's request waits for its busy \
                         server (clusters[].queue) instead of moving: set it to what the server's threads allow this instance"
                    ));
                }
                ("MaxConnections", Ok(_)) => item.note(format!("{said}: no bound, as tether's default")),
                ("ServerIOTimeout", Ok(_)) => read.values.push((86_400_000, format!("{said}: the plug-in waited as long as the server took; tether's read_timeout is bounded, here at its most"))),
                (n, _) => item.note(format!("{said}: {}", why(n))),
            }
        }
        for child in s
            .children()
            .filter(|n| n.is_element() && !n.has_tag_name("Transport"))
        {
            item.note(format!(
                "{} (line {}): no tether equivalent",
                said(child),
                line(child)
            ));
        }
        c.servers.push(item);
    }
    for b in &backups {
        if !servers
            .iter()
            .any(|s| s.attribute("Name") == Some(b.as_str()))
        {
            c.item.note(format!(
                "<BackupServers> names `{b}`, which is no <Server> of the cluster: left out"
            ));
        }
    }
    // Without ServerIOTimeout the plug-in blocked: it waited as long as the server took.
    for s in servers
        .iter()
        .filter(|s| s.attribute("ServerIOTimeout").is_none())
    {
        read.values.push((
            86_400_000,
            format!(
                "Server `{}` has no ServerIOTimeout: the plug-in waited as long as the server took; tether's read_timeout is bounded, here at its most (its default, 60s, would answer long requests with 504)",
                s.attribute("Name").unwrap_or("")
            ),
        ));
    }
    connect.set(&mut c.item, "connect_timeout", 600_000);
    read.set(&mut c.item, "read_timeout", 86_400_000);
    timeout_retries(sc, &timing_out, &mut c.item);
    if all_clones {
        c.item.fields.insert(
            1,
            super::doc::Field {
                key: "session_style",
                value: Value::Str("websphere".into()),
                note: None,
            },
        );
    } else {
        c.item.note(
            "REVIEW: not every Server has a CloneID, so this is not a websphere cluster (session_style: tomcat, the default): sessions are balanced without affinity to clones",
        );
    }
    if https {
        c.sections.push(("tls", tls(name, &keyrings, by_ip)));
    }
    if !ws.fields.is_empty() {
        c.sections.push(("websphere", ws));
    }
    Ok(c)
}

/// `ServerIOTimeoutRetry` (default -1, no limit but the servers; 0, none): the plug-in
/// sent a request whose server timed out to another server, as `retry_on:
/// response_timeout` does; a positive value bounds the resends (`max_attempts`).
fn timeout_retries(sc: Node, timing_out: &[String], item: &mut Item) {
    let attr = sc.attribute("ServerIOTimeoutRetry");
    let retries = attr.map_or(Ok(-1), str::parse::<i64>);
    let said = match attr {
        Some(v) => format!("ServerIOTimeoutRetry=\"{v}\""),
        None => "ServerIOTimeoutRetry's default (-1)".to_string(),
    };
    match retries {
        Ok(0) => item.note(format!(
            "{said}: a timed-out request is not sent again, as tether's default"
        )),
        Ok(_) if timing_out.is_empty() => item.note(format!(
            "{said}: no Server has a ServerIOTimeout, so nothing timed out"
        )),
        Ok(n) => {
            item.set(
                "retry_on",
                Value::Words(vec![
                    "connect_failure",
                    "empty_response",
                    "response_timeout",
                ]),
                format!("{said}: a request whose server timed out went to another server"),
            );
            if n > 0 {
                item.set(
                    "max_attempts",
                    Value::Num((n + 1).min(16)),
                    format!("{said}: the first try and {n} resends"),
                );
            }
        }
        Err(_) => item.note(format!("{said}: not a number, left out")),
    }
}

/// The cluster's `tls:` for https transports.
fn tls(cluster: &str, keyrings: &[String], by_ip: bool) -> Item {
    let mut t = Item::default();
    let keyring = keyrings
        .iter()
        .find_map(|k| k.strip_prefix("keyring="))
        .unwrap_or("the plug-in's keyring (plugin-key.kdb)");
    t.note(format!(
        "REVIEW: the plug-in checked the servers' certificates with the keyring {keyring}, a CMS file tether cannot read: export its signer certificates to PEM (gskcapicmd -cert -extract -db {keyring} -stashed -label LABEL -target {cluster}-ca.pem) and set `ca:` to that file"
    ));
    t.note(format!("ca: /etc/tether/{cluster}-ca.pem"));
    for k in keyrings {
        t.note(format!(
            "Transport <Property {k}>: no tether equivalent (see above)"
        ));
    }
    t.set(
        "verify",
        Value::Bool(true),
        Some("the default: certificates are checked".to_string()),
    );
    if by_ip {
        t.set(
            "sni",
            Value::Str("set-the-certificate-name.invalid".into()),
            Some(
                "REVIEW: the servers are addressed by IP: put here the name their certificates carry"
                    .to_string(),
            ),
        );
    }
    t
}
