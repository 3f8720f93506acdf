//! The imported config as tether will read it, with comments, and its YAML text.
//!
//! serde_yaml cannot write comments, and every setting without an equivalent must appear
//! as one, so the text is written here: block mappings, quoted where needed.

use std::fmt::Write;

/// A scalar or a short list of numbers.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Num(i64),
    Bool(bool),
    /// Milliseconds, written `10s` or `1500ms`.
    Dur(u64),
    Nums(Vec<i64>),
    /// `[a, b]`: plain words.
    Words(Vec<&'static str>),
}

/// `key: value  # note`.
#[derive(Debug, Clone)]
pub struct Field {
    pub key: &'static str,
    pub value: Value,
    pub note: Option<String>,
}

/// A block mapping with comment lines above it.
#[derive(Debug, Clone, Default)]
pub struct Item {
    pub notes: Vec<String>,
    pub fields: Vec<Field>,
}

impl Item {
    pub fn set(&mut self, key: &'static str, value: Value, note: impl Into<Option<String>>) {
        self.fields.retain(|f| f.key != key);
        self.fields.push(Field {
            key,
            value,
            note: note.into(),
        });
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|f| f.key == key).map(|f| &f.value)
    }

    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }
}

#[derive(Debug, Clone, Default)]
pub struct Cluster {
    pub item: Item,
    /// The largest request body of the cluster's routes, with the source that says so.
    pub max_request_body: Option<(u64, String)>,
    /// Nested mappings (`tls`, `health_check`, `websphere`), in order.
    pub sections: Vec<(&'static str, Item)>,
    pub servers: Vec<Item>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub host: Option<String>,
    pub path: String,
    pub cluster: String,
    pub exclude: bool,
    pub disabled: bool,
    pub note: Option<String>,
    /// The route's `max_request_body` (the plug-in's `PostSizeLimit` of its cluster).
    pub max_request_body: Option<u64>,
}

/// A listener's `serve:`: the web server's document root.
#[derive(Debug, Clone, PartialEq)]
pub struct Serve {
    pub root: String,
    /// Where the root comes from (`--document-root`, `httpd.conf:15: DocumentRoot`).
    pub note: String,
    /// Written commented out: the directory is not on this machine, and `tether -t`
    /// refuses a root it cannot read.
    pub commented: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Listener {
    pub notes: Vec<String>,
    pub name: String,
    pub address: String,
    pub cluster: Option<String>,
    /// Comment lines written inside the listener, before `routes:` (e.g. a `tls:` to fill).
    pub inner: Vec<String>,
    /// Files for the requests no route takes and those an exclusion turns away.
    pub serve: Option<Serve>,
    pub routes: Vec<Route>,
    /// `route_order`, written when the listener has routes.
    pub route_order: Option<&'static str>,
    /// Comment lines about mounts that became no route.
    pub route_notes: Vec<String>,
    /// Written commented out (it needs files that do not exist yet).
    pub commented: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Doc {
    pub header: Vec<String>,
    /// Top-level fields (`watch_config`), written before `listeners:`.
    pub top: Item,
    pub listeners: Vec<Listener>,
    pub clusters: Vec<Cluster>,
    pub footer: Vec<String>,
}

impl Doc {
    /// The YAML text.
    pub fn to_yaml(&self) -> String {
        let mut w = Writer::default();
        for h in &self.header {
            w.comment(0, h);
        }
        for n in &self.top.notes {
            w.comment(0, n);
        }
        fields(&mut w, 0, &self.top.fields, false);
        w.line(0, "listeners:");
        for l in &self.listeners {
            listener(&mut w, l);
        }
        w.line(0, "");
        w.line(0, "clusters:");
        for c in &self.clusters {
            cluster(&mut w, c);
        }
        if !self.footer.is_empty() {
            w.line(0, "");
            for f in &self.footer {
                w.comment(0, f);
            }
        }
        w.out
    }
}

fn listener(w: &mut Writer, l: &Listener) {
    for n in &l.notes {
        w.comment(2, n);
    }
    w.prefix = if l.commented { "# " } else { "" };
    w.line(2, &format!("- name: {}", scalar_str(&l.name)));
    w.line(4, &format!("address: {}", quoted(&l.address)));
    if let Some(c) = &l.cluster {
        w.line(4, &format!("cluster: {}", scalar_str(c)));
    }
    for i in &l.inner {
        w.line(4, i);
    }
    if let Some(s) = &l.serve {
        let outer = w.prefix;
        if s.commented {
            w.prefix = "# ";
        }
        w.noted(4, "serve:", Some(&s.note));
        w.line(6, &format!("root: {}", scalar_str(&s.root)));
        w.prefix = outer;
    }
    if let Some(order) = l.route_order.filter(|_| !l.routes.is_empty()) {
        w.noted(
            4,
            &format!("route_order: {order}"),
            Some("which route wins, as the source ordered its rules"),
        );
    }
    if !l.routes.is_empty() {
        w.line(4, "routes:");
    }
    for r in &l.routes {
        let mut parts = Vec::new();
        if let Some(h) = &r.host {
            parts.push(format!("host: {}", quoted(h)));
        }
        parts.push(format!("path: {}", quoted(&r.path)));
        parts.push(format!("cluster: {}", scalar_str(&r.cluster)));
        if r.exclude {
            parts.push("exclude: true".into());
        }
        if r.disabled {
            parts.push("disabled: true".into());
        }
        if let Some(n) = r.max_request_body {
            parts.push(format!("max_request_body: {n}"));
        }
        let text = format!("- {{ {} }}", parts.join(", "));
        w.noted(6, &text, r.note.as_deref());
    }
    w.prefix = "";
    let at = if l.routes.is_empty() { 4 } else { 6 };
    for n in &l.route_notes {
        w.comment(at, n);
    }
}

fn cluster(w: &mut Writer, c: &Cluster) {
    for n in &c.item.notes {
        w.comment(2, n);
    }
    fields(w, 2, &c.item.fields, true);
    for (key, item) in &c.sections {
        // An empty section is `{}`: a bare `tls:` would read as no TLS at all.
        let empty = if item.fields.is_empty() { " {}" } else { "" };
        w.line(4, &format!("{key}:{empty}"));
        for n in &item.notes {
            w.comment(6, n);
        }
        fields(w, 6, &item.fields, false);
    }
    w.line(4, "servers:");
    for s in &c.servers {
        for n in &s.notes {
            w.comment(6, n);
        }
        fields(w, 6, &s.fields, true);
    }
}

/// The fields of a mapping at `indent`; `dash`: the first one opens a list item.
fn fields(w: &mut Writer, indent: usize, fields: &[Field], dash: bool) {
    for (i, f) in fields.iter().enumerate() {
        let (at, lead) = match (dash, i) {
            (true, 0) => (indent, "- "),
            (true, _) => (indent + 2, ""),
            (false, _) => (indent, ""),
        };
        let text = format!("{lead}{}: {}", f.key, value(&f.value));
        w.noted(at, &text, f.note.as_deref());
    }
}

#[derive(Default)]
struct Writer {
    out: String,
    /// `# ` while a commented-out block is written.
    prefix: &'static str,
}

impl Writer {
    fn line(&mut self, indent: usize, text: &str) {
        if text.is_empty() {
            self.out.push('\n');
            return;
        }
        let _ = writeln!(self.out, "{}{:indent$}{text}", self.prefix, "");
    }

    fn noted(&mut self, indent: usize, text: &str, note: Option<&str>) {
        match note {
            Some(n) => self.line(indent, &format!("{text}   # {}", one_line(n))),
            None => self.line(indent, text),
        }
    }

    fn comment(&mut self, indent: usize, text: &str) {
        let text = one_line(text);
        let sep = if text.is_empty() { "" } else { " " };
        let _ = writeln!(self.out, "{:indent$}#{sep}{text}", "");
    }
}

/// Comment text on one line: control characters (a newline would end the comment)
/// become spaces.
pub fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim_end()
        .to_string()
}

fn value(v: &Value) -> String {
    match v {
        Value::Str(s) => scalar_str(s),
        Value::Num(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Dur(ms) => duration(*ms),
        Value::Nums(list) => format!(
            "[{}]",
            list.iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Words(list) => format!("[{}]", list.join(", ")),
    }
}

/// A duration as tether writes it: `0s`, `1h`, `2m`, `10s`, `1500ms` (the config's own
/// writer, so that what an importer writes reads back as the same value).
pub use crate::config::written_duration as duration;

/// A string plain when YAML reads it back as the same string, else double-quoted.
pub fn scalar_str(s: &str) -> String {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '/')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n"
        );
    if plain {
        s.to_string()
    } else {
        quoted(s)
    }
}

/// Always double-quoted, with every character YAML does not allow written literally (C0
/// and C1 controls, DEL, U+FFFE and U+FFFF) escaped, so that it reads back as `s`. (A JSON
/// string escapes only C0 controls: a C1 control from a Latin-1 file made invalid YAML,
/// found by the `jk_import` and `websphere_import` fuzz targets.)
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() || matches!(c, '\u{FFFE}' | '\u{FFFF}') => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_read_back_as_written() {
        for s in [
            "web",
            "true",
            "No",
            "1",
            "1.5",
            "*:443",
            "a b",
            "x#y",
            "\\",
            "",
            "-x",
            "ünï",
            "/shop/*",
            "a: b",
            "null",
            "~",
            "m\u{8d}x",
            "del\u{7f}",
            "\u{0}\u{1b}\r\n\t",
            "q\"uote",
            "\u{85}\u{a0}\u{ffff}\u{fffe}\u{feff}",
        ] {
            let yaml = format!("k: {}\n", scalar_str(s));
            let v: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
            assert_eq!(v["k"].as_str(), Some(s), "{yaml}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(duration(0), "0s");
        assert_eq!(duration(1500), "1500ms");
        assert_eq!(duration(60_000), "1m");
        assert_eq!(duration(7_200_000), "2h");
        assert_eq!(duration(90_000), "90s");
    }

    #[test]
    fn a_commented_listener_is_all_comment() {
        let doc = Doc {
            listeners: vec![Listener {
                name: "https".into(),
                address: "0.0.0.0:443".into(),
                commented: true,
                routes: vec![Route {
                    host: Some("*:443".into()),
                    path: "/a/*".into(),
                    cluster: "c".into(),
                    exclude: false,
                    disabled: false,
                    note: Some("x\ny".into()),
                    max_request_body: None,
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = doc.to_yaml();
        for line in text.lines().skip(1).take_while(|l| !l.is_empty()) {
            assert!(line.trim_start().starts_with('#'), "{line}");
        }
        assert!(text.contains("# x y"), "{text}");
    }
}
