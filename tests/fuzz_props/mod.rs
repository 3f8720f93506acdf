//! What each fuzz target checks: one function per parser of hostile input, which
//! takes any bytes and panics when the parser breaks a property (a crash is a panic too).
//! `cargo test --test fuzz_corpus` replays the seed corpus in `tests/corpus/<target>/`
//! through them, so CI runs every seed; `fuzz/fuzz_targets/` runs them under libFuzzer
//! (`bench/fuzz`).

#![allow(dead_code)]

use http::header::{HeaderMap, HeaderValue, COOKIE};
use std::sync::OnceLock;
use tether::routing::{ClusterRouter, Decision};

/// A target's property: panics on an input that breaks it.
pub type Property = fn(&[u8]);

/// Every target: its name (the corpus folder and the fuzz target's) and its property.
pub const TARGETS: &[(&str, Property)] = &[
    ("session_id", session_id),
    ("wspt", wspt),
    ("route_glob", route_glob),
    ("config_yaml", config_yaml),
    ("jk_import", jk_import),
    ("websphere_import", websphere_import),
    ("proxy_protocol", proxy_protocol),
    ("ajp_response", ajp_response),
];

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// The input as parts separated by a line `----`.
fn parts(input: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = input;
    while let Some(at) = rest.windows(6).position(|w| w == b"\n----\n") {
        out.push(&rest[..at]);
        rest = &rest[at + 6..];
    }
    out.push(rest);
    out
}

fn router(yaml: &str) -> ClusterRouter {
    let config = tether::config::parse(yaml, "fuzz").expect("the fuzz cluster is valid");
    ClusterRouter::new(&config.clusters[0], None)
}

/// A Tomcat cluster (routes after the first `.`) and a WebSphere one (clone ids after `:`).
fn routers() -> &'static [ClusterRouter; 2] {
    static R: OnceLock<[ClusterRouter; 2]> = OnceLock::new();
    R.get_or_init(|| {
        let listener = "listeners:\n  - { name: web, address: \"127.0.0.1:8080\", cluster: c }\n";
        [
            router(&format!(
                "{listener}clusters:\n  - name: c\n    servers:\n\
                 \x20     - {{ name: n1, address: \"10.0.0.1:80\" }}\n\
                 \x20     - {{ name: n2, address: \"10.0.0.2:80\", route: r2 }}\n"
            )),
            router(&format!(
                "{listener}clusters:\n  - name: c\n    websphere: {{ partition_table_max: 100 }}\n    servers:\n\
                 \x20     - {{ name: w1, address: \"10.0.0.1:80\", clone_id: c1 }}\n\
                 \x20     - {{ name: w2, address: \"10.0.0.2:80\", clone_id: c2 }}\n"
            )),
        ]
    })
}

/// A request's path (first part) and `Cookie` field (second): the session id the router
/// takes is a substring of one of them, what it resolves to is a part of the id, and the
/// decision names a server of the cluster.
pub fn session_id(input: &[u8]) {
    let p = parts(input);
    let path = p[0];
    let mut headers = HeaderMap::new();
    if let Some(cookie) = p.get(1).and_then(|c| HeaderValue::from_bytes(c).ok()) {
        headers.insert(COOKIE, cookie);
    }
    let cookie = headers.get(COOKIE).map_or(&b""[..], |v| v.as_bytes());
    for r in routers() {
        let seen = r.explain(path, &headers, 1_000_000);
        if let Some(id) = &seen.session_id {
            assert!(!id.is_empty());
            assert!(
                contains(path, id) || contains(cookie, id),
                "session id {id:?} is in neither the path nor the cookie"
            );
            if let Some(token) = &seen.token {
                assert!(contains(id, token), "token {token:?} not in id {id:?}");
            }
        }
        if let Decision::Route { server, .. } = seen.decision {
            assert!(server < r.servers().len());
        }
    }
    if let Some(v) = tether::routing::path_parameter(path, b"jsessionid") {
        assert!(contains(path, v) && !v.is_empty());
    }
    for v in tether::routing::cookie_values(cookie, b"JSESSIONID") {
        assert!(contains(cookie, v) && !v.is_empty());
        assert!(!v.contains(&b';') && !v.contains(&b','));
    }
}

/// A `$WSPT` value: taken whole or refused; what is taken round-trips (written back in
/// tether's form, it parses to the same entries).
pub fn wspt(input: &[u8]) {
    let Ok(entries) = tether::routing::parse_wspt(input) else {
        return;
    };
    let entries: Vec<(Vec<u8>, Vec<u8>)> = entries.map(|(p, c)| (p.to_vec(), c.to_vec())).collect();
    assert!(entries.len() <= tether::routing::MAX_WSPT_ENTRIES);
    let mut again = Vec::new();
    for (i, (p, c)) in entries.iter().enumerate() {
        assert!(contains(input, p) && contains(input, c));
        if i > 0 {
            again.extend_from_slice(b", ");
        }
        again.extend_from_slice(p);
        again.push(b'=');
        again.extend_from_slice(c);
    }
    if again.len() <= tether::routing::MAX_WSPT_LEN {
        let back: Vec<(Vec<u8>, Vec<u8>)> = tether::routing::parse_wspt(&again)
            .expect("tether's own form parses")
            .map(|(p, c)| (p.to_vec(), c.to_vec()))
            .collect();
        assert_eq!(back, entries);
    }
}

/// mod_jk's `*`/`?` patterns: tether's matcher agrees with a plain dynamic-programming one
/// (first part: the pattern, second: the text).
pub fn route_glob(input: &[u8]) {
    let p = parts(input);
    let (pattern, text) = (p[0], p.get(1).copied().unwrap_or(b""));
    if pattern.len() > 256 || text.len() > 1024 {
        return;
    }
    let glob = tether::routing::routes::glob::matches(pattern, text);
    check_glob(pattern, text, glob);
    if !tether::routing::routes::glob::has_wildcards(pattern) {
        assert_eq!(glob, pattern == text);
        assert_eq!(
            tether::routing::routes::glob::literal_len(pattern),
            pattern.len()
        );
    }
}

/// `matched` is what a plain matcher says of `pattern` and `text`.
pub fn check_glob(pattern: &[u8], text: &[u8], matched: bool) {
    // Dynamic programming over (pattern position, text position), from the ends.
    let (n, m) = (pattern.len(), text.len());
    let mut dp = vec![vec![false; m + 1]; n + 1];
    dp[n][m] = true;
    for i in (0..n).rev() {
        for j in (0..=m).rev() {
            dp[i][j] = match pattern[i] {
                b'*' => dp[i + 1][j] || (j < m && dp[i][j + 1]),
                b'?' => j < m && dp[i + 1][j + 1],
                c => j < m && text[j] == c && dp[i + 1][j + 1],
            };
        }
    }
    let reference = |_: &[u8], _: &[u8]| dp[0][0];
    assert_eq!(
        matched,
        reference(pattern, text),
        "pattern {pattern:?} text {text:?}"
    );
}

/// A config file: it loads, or yields errors, each with a path or a message, and a position
/// inside the file when it has one; never a panic.
pub fn config_yaml(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    tether::config::no_name_lookups();
    match tether::config::parse(text, "fuzz.yaml") {
        Ok(config) => {
            let _ = tether::config::warning_lines(&config, "fuzz.yaml");
        }
        Err(e) => {
            assert!(!e.errors.is_empty(), "an error list with no error");
            // YAML's line breaks: CR LF, CR or LF (a file of bare CRs is many lines).
            let lines = text.replace("\r\n", "\n").matches(['\r', '\n']).count() + 1;
            for err in &e.errors {
                assert!(
                    !err.message.is_empty(),
                    "an error without a message: {err:?}"
                );
                if let Some((line, column)) = err.position {
                    assert!(
                        line >= 1 && line <= lines,
                        "line {line} of {lines}: {err:?}"
                    );
                    assert!(column >= 1, "{err:?}");
                }
            }
        }
    }
}

/// The imported config either passes `tether -t` (tether's own parser), or the importer
/// says what is wrong, at a line of the file when it names one.
fn imported(result: Result<String, tether::config::import::ImportError>, files: &[(&str, &[u8])]) {
    match result {
        Ok(yaml) => {
            // A host name is not looked up here (nothing leaves the machine); every other
            // check of `tether -t` must pass.
            tether::config::no_name_lookups();
            if let Err(e) = tether::config::parse(&yaml, "imported.yaml") {
                let real: Vec<_> = e
                    .errors
                    .iter()
                    .filter(|err| !err.message.ends_with(tether::config::NOT_LOOKED_UP))
                    .collect();
                assert!(
                    real.is_empty(),
                    "the import does not load:\n{e}\n---\n{yaml}"
                );
            }
        }
        Err(e) => {
            assert!(!e.message.is_empty());
            if let Some(line) = e.line {
                let text = files
                    .iter()
                    .find(|(name, _)| *name == e.file)
                    .map_or(&b""[..], |(_, t)| t);
                let lines = text.split(|&b| b == b'\n').count();
                assert!(line >= 1 && line <= lines, "{e} (of {lines} lines)");
            }
        }
    }
}

/// `workers.properties`, then (optional) `uriworkermap.properties` and an `httpd.conf`.
pub fn jk_import(input: &[u8]) {
    let p = parts(input);
    let text = |b: &[u8]| tether::config::import::text(b);
    let workers = text(p[0]);
    let map = p.get(1).map(|b| text(b));
    let httpd: Vec<String> = p.get(2).map(|b| text(b)).into_iter().collect();
    let result = tether::config::import::mod_jk_text(
        ("workers.properties", &workers),
        map.as_deref().map(|m| ("uriworkermap.properties", m)),
        &httpd
            .iter()
            .map(|h| ("httpd.conf", h.as_str()))
            .collect::<Vec<_>>(),
    );
    let mut files = vec![("workers.properties", p[0])];
    if let Some(m) = p.get(1) {
        files.push(("uriworkermap.properties", m));
    }
    if let Some(h) = p.get(2) {
        files.push(("httpd.conf", h));
    }
    imported(result, &files);
}

/// A WebSphere plug-in's `plugin-cfg.xml`.
pub fn websphere_import(input: &[u8]) {
    let text = tether::config::import::text(input);
    imported(
        tether::config::import::websphere_text("plugin-cfg.xml", &text),
        &[("plugin-cfg.xml", input)],
    );
}

/// The bytes a balancer sends first: a header is taken only whole, its length is within
/// what was read, the same bytes cut to that length read the same, and the facts it
/// carries are printable.
pub fn proxy_protocol(input: &[u8]) {
    use tether::front::listener::proxy_protocol::{parse_header, Parsed};
    match parse_header(input) {
        Parsed::Incomplete | Parsed::Refused(_) => {}
        Parsed::Header { len, client, facts } => {
            assert!(
                len > 0 && len <= input.len(),
                "length {len} of {}",
                input.len()
            );
            match parse_header(&input[..len]) {
                Parsed::Header {
                    len: again,
                    client: c,
                    ..
                } => assert_eq!((again, c), (len, client)),
                other => panic!("the header alone reads as {other:?}"),
            }
            for v in [
                &facts.authority,
                &facts.alpn,
                &facts.unique_id,
                &facts.tls_version,
                &facts.tls_client_cn,
                &facts.aws_vpce_id,
            ]
            .into_iter()
            .flatten()
            {
                assert!(v.bytes().all(|b| (0x20..0x7f).contains(&b)), "{v:?}");
            }
        }
    }
}

/// `ajp_response`: a server's packet is framed within the bytes that came, and its message
/// is taken whole or refused: every slice it gives lies in the payload, a head yields as
/// many fields as it declared, and a byte after a message it took makes it refused (but
/// the NUL Tomcat puts after a body chunk).
pub fn ajp_response(input: &[u8]) {
    use tether::wire::ajp::packet::frame;
    use tether::wire::ajp::response::{parse, Message};
    if let Ok(Some(range)) = frame(input, tether::wire::ajp::MAX_PACKET_SIZE) {
        assert!(range.end <= input.len() && range.start == 4);
    }
    let within = |s: &[u8]| {
        let (start, end) = (
            input.as_ptr() as usize,
            input.as_ptr() as usize + input.len(),
        );
        let at = s.as_ptr() as usize;
        assert!(
            s.is_empty() || (at >= start && at + s.len() <= end),
            "a slice outside the payload"
        );
    };
    let Ok(message) = parse(input) else { return };
    let mut flush_nul = false;
    match message {
        Message::Headers { reason, fields, .. } => {
            within(reason);
            // The count follows the status and the reason (a null reason has no NUL).
            let at = match input[3..5] == [0xFF, 0xFF] {
                true => 5,
                false => 5 + reason.len() + 1,
            };
            let declared = u16::from_be_bytes([input[at], input[at + 1]]);
            let mut n = 0;
            for (name, value) in fields {
                assert!(!name.is_empty());
                within(value);
                n += 1;
            }
            assert_eq!(n, declared, "the fields a head declared");
        }
        Message::Body(data) => {
            within(data);
            flush_nul = input.len() == 3 + data.len();
        }
        _ => {}
    }
    for extra in [0u8, 1, 0xFF] {
        let mut longer = input.to_vec();
        longer.push(extra);
        if flush_nul && extra == 0 {
            continue;
        }
        assert!(
            parse(&longer).is_err(),
            "a byte after the message was taken"
        );
    }
}
