//! mod_jk mounts: `uriworkermap.properties` lines and `JkMount`/`JkUnMount` in httpd.conf
//! (with the `<VirtualHost>` and `<Location>` they sit in).

use super::ImportError;

/// One mapping rule, after `X|Y` became `X` and `XY`.
#[derive(Debug, Clone, PartialEq)]
pub struct Mount {
    pub pattern: String,
    pub worker: String,
    /// uriworkermap `!`, `JkUnMount`.
    pub exclude: bool,
    /// uriworkermap `-`.
    pub disabled: bool,
    /// Rule extensions (`;reply_timeout=...`), as written.
    pub extensions: Option<String>,
    /// Index into [`Mounts::vhosts`]; `None`: the main server.
    pub vhost: Option<usize>,
    /// `file:line`.
    pub source: String,
    /// Which kind of source defined it: mod_jk's last key of precedence.
    pub from: From,
}

/// The sources of mounts, in mod_jk's order of precedence (for patterns of equal `/`
/// count and length): `uriworkermap.properties`, then `JkMount`, then `worker.X.mount`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum From {
    MountFile,
    JkMount,
    WorkerMount,
}

/// Why a rule became no mount.
#[derive(Debug, PartialEq)]
pub enum Refused {
    /// A rule mod_jk itself leaves out (and logs), said in a note.
    ByModJk(String),
    /// A line that is not a rule: the import stops.
    Malformed(String),
}

/// A directive's value and where it is (`httpd.conf:15`).
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    pub value: String,
    pub source: String,
}

#[derive(Debug, Clone, Default)]
pub struct VHost {
    /// `ServerName` (without scheme or port) then every `ServerAlias`.
    pub names: Vec<String>,
    /// `<VirtualHost *:443>` or `SSLEngine on`.
    pub tls: bool,
    /// `JkMountCopy On`: the main server's mounts apply here too.
    pub copy: bool,
    pub address: String,
    pub source: String,
    pub cert: Option<String>,
    pub key: Option<String>,
    /// Its own `DocumentRoot` (else the main server's).
    pub document_root: Option<Said>,
}

#[derive(Debug, Default)]
pub struct Mounts {
    pub mounts: Vec<Mount>,
    pub vhosts: Vec<VHost>,
    /// `JkMountCopy All` in the main server.
    pub copy_all: bool,
    /// Directives with no tether equivalent, and other remarks.
    pub notes: Vec<String>,
    /// The main server's `LimitRequestBody` (bytes, 0: none) and where it is.
    pub body_limit: Option<(u64, String)>,
    /// The main server's `DocumentRoot`, and the `ServerRoot` a relative one is under.
    pub document_root: Option<Said>,
    pub server_root: Option<Said>,
}

/// `X|Y` is the two patterns `X` and `XY`.
fn expand(pattern: &str) -> Vec<String> {
    match pattern.split_once('|') {
        Some((a, b)) => vec![a.to_string(), format!("{a}{b}")],
        None => vec![pattern.to_string()],
    }
}

/// mod_jk (`uri_worker_map_add`) leaves out a pattern that does not start with `/`, though
/// its documentation shows `*.jsp=worker`.
fn check_pattern(p: &str) -> Result<(), Refused> {
    if p.starts_with('/') {
        Ok(())
    } else {
        Err(Refused::ByModJk(format!(
            "REVIEW: `{p}` does not start with `/`: mod_jk leaves such a rule out (it logs \"invalid context\"), and so does the import; write `/{}` to route it",
            p.trim_start_matches('/')
        )))
    }
}

/// `worker;ext=1;ext2=2` → worker and extensions.
fn split_worker(target: &str) -> (String, Option<String>) {
    match target.split_once(';') {
        Some((w, ext)) => (w.trim().to_string(), Some(ext.trim().to_string())),
        None => (target.trim().to_string(), None),
    }
}

/// One rule: `pattern` with its `!` / `-` modifiers, `target` a worker with extensions.
pub fn rule(
    pattern: &str,
    target: &str,
    vhost: Option<usize>,
    source: &str,
    from: From,
) -> Result<Vec<Mount>, Refused> {
    let mut pattern = pattern.trim();
    let (mut exclude, mut disabled) = (false, false);
    loop {
        if let Some(p) = pattern.strip_prefix('!') {
            exclude = true;
            pattern = p;
        } else if let Some(p) = pattern.strip_prefix('-') {
            disabled = true;
            pattern = p;
        } else {
            break;
        }
    }
    check_pattern(pattern)?;
    let (worker, extensions) = split_worker(target);
    if worker.is_empty() {
        return Err(Refused::Malformed(format!(
            "`{pattern}` is mapped to no worker"
        )));
    }
    Ok(expand(pattern)
        .into_iter()
        .map(|p| Mount {
            pattern: p,
            worker: worker.clone(),
            exclude,
            disabled,
            extensions: extensions.clone(),
            vhost,
            source: source.to_string(),
            from,
        })
        .collect())
}

/// Adds the rules of a `uriworkermap.properties`.
pub fn uriworkermap(text: &str, file: &str, out: &mut Mounts) -> Result<(), ImportError> {
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let err = |m: String| ImportError::at(file, line, m);
        let Some((pattern, target)) = content.split_once('=') else {
            return Err(err(format!(
                "expected `/uri/pattern=worker`, found `{content}`"
            )));
        };
        let source = format!("{file}:{line}");
        match rule(pattern, target, None, &source, From::MountFile) {
            Ok(rules) => out.mounts.extend(rules),
            Err(Refused::ByModJk(why)) => out.notes.push(format!("{source}: {why}")),
            Err(Refused::Malformed(why)) => return Err(err(why)),
        }
    }
    Ok(())
}

/// Splits a directive line into words; double quotes group.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut quoted, mut any) = (false, false);
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// What a `Jk*` directive without an equivalent was for, when it helps to say.
fn jk_note(directive: &str) -> &'static str {
    match directive.to_ascii_lowercase().as_str() {
        "jklogfile" | "jkloglevel" => {
            "tether logs to stderr or server.error_log; RUST_LOG sets the level"
        }
        "jkshmfile" => "tether keeps run-time state in memory (and under state_dir)",
        "jkrequestlogformat" => "tether's access_log writes one JSON line per request",
        "jkworkersfile" => "give that file as the first argument of `tether import mod_jk`",
        "jkworkerproperty" => "move it into workers.properties to have it imported",
        "jkmountfile" => "give that file as the uriworkermap argument of `tether import mod_jk`",
        "jkstripsession" => "tether forwards the path as it came",
        _ => "no tether equivalent",
    }
}

/// Adds the mounts, virtual hosts and `Jk*` settings of an Apache config file.
pub fn httpd(text: &str, file: &str, out: &mut Mounts) -> Result<(), ImportError> {
    let mut vhost: Option<usize> = None;
    let mut location: Option<(String, usize)> = None;
    let mut pending = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if pending.is_empty() {
            start = line;
        }
        // Apache joins a line ending in `\` with the next.
        if let Some(head) = raw.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(raw);
        let text = std::mem::take(&mut pending);
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let line = start;
        let err = |m: String| ImportError::at(file, line, m);
        let source = format!("{file}:{line}");
        let w = words(trimmed);
        let directive = w[0].to_ascii_lowercase();
        let args = &w[1..];
        let section_arg = || args.join(" ").trim_end_matches('>').trim().to_string();
        match directive.as_str() {
            "<virtualhost" => {
                if let Some(v) = vhost {
                    return Err(err(format!(
                        "<VirtualHost> inside the one opened at {}",
                        out.vhosts[v].source
                    )));
                }
                let address = section_arg();
                let tls = address.split_whitespace().any(|a| a.ends_with(":443"));
                out.vhosts.push(VHost {
                    address,
                    tls,
                    source: source.clone(),
                    ..Default::default()
                });
                vhost = Some(out.vhosts.len() - 1);
            }
            "</virtualhost>" if vhost.take().is_none() => {
                return Err(err("</VirtualHost> without <VirtualHost>".into()));
            }
            "</virtualhost>" => {}
            "<location" => location = Some((section_arg(), line)),
            "</location>" => location = None,
            "<locationmatch" => {
                location = Some((String::new(), line));
            }
            "</locationmatch>" => location = None,
            "servername" | "serveralias" => {
                if let Some(v) = vhost {
                    for a in args {
                        let name = a
                            .trim_start_matches("https://")
                            .trim_start_matches("http://");
                        let name = name.split(':').next().unwrap_or(name);
                        if directive == "servername" {
                            out.vhosts[v].names.insert(0, name.to_ascii_lowercase());
                        } else {
                            out.vhosts[v].names.push(name.to_ascii_lowercase());
                        }
                    }
                }
            }
            "sslengine" => {
                if let Some(v) = vhost {
                    out.vhosts[v].tls = args.first().is_some_and(|a| a.eq_ignore_ascii_case("on"));
                }
            }
            "sslcertificatefile" => {
                if let Some(v) = vhost {
                    out.vhosts[v].cert = args.first().cloned();
                }
            }
            "sslcertificatekeyfile" => {
                if let Some(v) = vhost {
                    out.vhosts[v].key = args.first().cloned();
                }
            }
            "jkmountcopy" => {
                let on = args.first().map(|a| a.to_ascii_lowercase());
                match (vhost, on.as_deref()) {
                    (Some(v), Some("on")) => out.vhosts[v].copy = true,
                    (None, Some("all")) => out.copy_all = true,
                    _ => {}
                }
            }
            "jkmount" | "jkunmount" => {
                let exclude = directive == "jkunmount";
                let (pattern, target) = match (args, &location) {
                    ([p, t], _) => (p.clone(), t.clone()),
                    ([t], Some((loc, _))) if !loc.is_empty() => (loc.clone(), t.clone()),
                    ([_], Some(_)) => {
                        out.notes.push(format!(
                            "{source}: {} inside <LocationMatch>: a regular expression has no tether route; not imported",
                            w[0]
                        ));
                        continue;
                    }
                    _ => {
                        return Err(err(format!(
                            "{} takes a URI pattern and a worker (only the worker inside <Location>): `{trimmed}`",
                            w[0]
                        )))
                    }
                };
                // Apache refuses to start on a JkMount that does not begin with `/`.
                let rules = match rule(&pattern, &target, vhost, &source, From::JkMount) {
                    Ok(rules) => rules,
                    Err(Refused::ByModJk(why) | Refused::Malformed(why)) => return Err(err(why)),
                };
                for mut m in rules {
                    m.exclude |= exclude;
                    out.mounts.push(m);
                }
            }
            "limitrequestbody" => match (args.first().map(|a| a.parse::<u64>()), vhost, &location) {
                (Some(Ok(n)), None, None) => out.body_limit = Some((n, source.clone())),
                (Some(Ok(_)), _, _) => out.notes.push(format!(
                    "{source}: {trimmed}: only the main server's LimitRequestBody is imported (listeners[].limits.max_request_body); a route's own is routes[].max_request_body"
                )),
                _ => out.notes.push(format!("{source}: {trimmed}: not a number of bytes, left out")),
            },
            "documentroot" | "serverroot" => {
                let Some(value) = args.first() else {
                    out.notes.push(format!("{source}: {trimmed}: no directory, left out"));
                    continue;
                };
                let said = Some(Said {
                    value: value.clone(),
                    source: source.clone(),
                });
                match (directive.as_str(), vhost) {
                    ("serverroot", _) => out.server_root = said,
                    (_, Some(v)) => out.vhosts[v].document_root = said,
                    (_, None) => out.document_root = said,
                }
            }
            "alias" | "aliasmatch" | "scriptalias" | "scriptaliasmatch" => out
                .notes
                .push(super::docroot::alias(&source, &w[0], args)),
            "directoryindex" => out.notes.push(super::docroot::index(&source, args)),
            "include" | "includeoptional" => out.notes.push(format!(
                "{source}: {trimmed}: not followed; give that file with another --jkmount-from"
            )),
            d if d.starts_with("jk") => out
                .notes
                .push(format!("{source}: {trimmed}: {}", jk_note(d))),
            _ => {}
        }
    }
    if let Some(v) = vhost {
        return Err(ImportError::file(
            file,
            format!(
                "the <VirtualHost> opened at {} is not closed",
                out.vhosts[v].source
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uriworkermap_rules() {
        let mut m = Mounts::default();
        let text = "/shop|/*=lb\n!/shop/*.gif=lb # no gifs\n-/old/*=lb\n-!/x=*\n/*.jsp=lb;reply_timeout=60000\n*.jspx=lb\n";
        uriworkermap(text, "u.properties", &mut m).unwrap();
        let got: Vec<(&str, &str, bool, bool)> = m
            .mounts
            .iter()
            .map(|x| (x.pattern.as_str(), x.worker.as_str(), x.exclude, x.disabled))
            .collect();
        assert_eq!(
            got,
            [
                ("/shop", "lb", false, false),
                ("/shop/*", "lb", false, false),
                ("/shop/*.gif", "lb", true, false),
                ("/old/*", "lb", false, true),
                ("/x", "*", true, true),
                ("/*.jsp", "lb", false, false),
            ]
        );
        assert!(
            m.notes[0].starts_with("u.properties:6: REVIEW: `*.jspx`"),
            "{:?}",
            m.notes
        );
        assert_eq!(
            m.mounts[5].extensions.as_deref(),
            Some("reply_timeout=60000")
        );
        assert_eq!(m.mounts[2].source, "u.properties:2");
        for (bad, needle) in [
            ("/a=lb\nnoequals\n", "expected"),
            ("/a=lb\n/b=\n", "no worker"),
        ] {
            let e = uriworkermap(bad, "u", &mut Mounts::default()).unwrap_err();
            assert_eq!(e.line, Some(2));
            assert!(e.to_string().contains(needle), "{e}");
        }
    }

    #[test]
    fn httpd_sections() {
        let text = "\
JkWorkersFile /etc/jk/workers.properties
JkMount /app|/* lb
<VirtualHost *:443>
  ServerName https://www.example.com:443
  ServerAlias shop.example.com
  SSLEngine on
  JkMountCopy On
  JkUnMount /app/static/* \\
     lb
  <Location /jk-status>
    JkMount status
  </Location>
</VirtualHost>
";
        let mut m = Mounts::default();
        httpd(text, "httpd.conf", &mut m).unwrap();
        assert_eq!(m.vhosts.len(), 1);
        let v = &m.vhosts[0];
        assert_eq!(v.names, ["www.example.com", "shop.example.com"]);
        assert!(v.tls && v.copy);
        assert_eq!(m.mounts.len(), 4);
        assert_eq!(m.mounts[2].pattern, "/app/static/*");
        assert!(m.mounts[2].exclude);
        assert_eq!(m.mounts[2].source, "httpd.conf:8");
        assert_eq!(
            (m.mounts[3].pattern.as_str(), m.mounts[3].worker.as_str()),
            ("/jk-status", "status")
        );
        assert!(m.notes[0].contains("JkWorkersFile"));
        let e = httpd("JkMount\n", "h", &mut Mounts::default()).unwrap_err();
        assert_eq!(e.line, Some(1));
        let e = httpd("<VirtualHost *:80>\n", "h", &mut Mounts::default()).unwrap_err();
        assert!(e.to_string().contains("not closed"), "{e}");
    }
}
