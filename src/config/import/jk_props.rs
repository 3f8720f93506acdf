//! mod_jk's `workers.properties` syntax: `name=value` lines, `#` comments, no line
//! continuation (a value ending in `\` is a literal backslash), `$(var)` variables,
//! properties that accumulate when repeated, and `reference` inheritance.

use super::ImportError;
use std::collections::HashMap;

/// Worker directives whose repeated lines add up (comma-separated lists).
const ACCUMULATE: &[&str] = &[
    "balance_workers",
    "balanced_workers",
    "mount",
    "user",
    "good",
    "bad",
];

/// One worker's directive, after variables and inheritance.
#[derive(Debug, Clone, PartialEq)]
pub struct Prop {
    pub directive: String,
    pub value: String,
    /// Where it was set (for an inherited one: in the template).
    pub line: usize,
    /// Inherited from this worker through `reference`.
    pub from: Option<String>,
}

#[derive(Debug, Default)]
pub struct Worker {
    pub name: String,
    pub line: usize,
    pub props: Vec<Prop>,
}

impl Worker {
    pub fn get(&self, directive: &str) -> Option<&Prop> {
        self.props.iter().find(|p| p.directive == directive)
    }
}

/// The whole file.
#[derive(Debug, Default)]
pub struct Workers {
    /// `worker.list`, in order, with the line each name came from.
    pub list: Vec<(String, usize)>,
    /// In order of first appearance.
    pub workers: Vec<Worker>,
    /// `worker.<global>` settings other than `list` (e.g. `worker.maintain`).
    pub globals: Vec<(String, String, usize)>,
    /// `name=value` lines that are not `worker.` properties: variables.
    pub vars: Vec<(String, String, usize)>,
    /// Notes on the file itself (repeated settings, variables from the environment).
    pub notes: Vec<String>,
    /// Workers named by another's `reference` (templates).
    pub referenced: Vec<String>,
}

impl Workers {
    pub fn worker(&self, name: &str) -> Option<&Worker> {
        self.workers.iter().find(|w| w.name == name)
    }
}

/// Splits a comma or white-space separated list.
pub fn list(value: &str) -> impl Iterator<Item = &str> {
    value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
}

fn valid_worker_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Parses `text`, the contents of `file`.
pub fn parse(text: &str, file: &str) -> Result<Workers, ImportError> {
    let err = |line: usize, message: String| ImportError::at(file, line, message);
    let mut out = Workers::default();
    let mut vars: HashMap<String, String> = HashMap::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let Some((key, value)) = content.split_once('=') else {
            return Err(err(
                line,
                format!("expected `name=value`, found `{content}`"),
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() {
            return Err(err(line, format!("a property without a name: `{content}`")));
        }
        if key.contains(char::is_whitespace) {
            return Err(err(
                line,
                format!("a property name cannot contain white space: `{key}`"),
            ));
        }
        let value = substitute(value, &vars, &mut out.notes).map_err(|m| err(line, m))?;
        let Some(rest) = key.strip_prefix("worker.") else {
            vars.insert(key.to_string(), value.clone());
            out.vars.push((key.to_string(), value, line));
            continue;
        };
        let Some((name, directive)) = rest.split_once('.') else {
            if rest == "list" {
                out.list.extend(list(&value).map(|w| (w.to_string(), line)));
            } else if rest.is_empty() {
                return Err(err(line, format!("`{key}` names no setting")));
            } else {
                out.globals.push((rest.to_string(), value, line));
            }
            continue;
        };
        if !valid_worker_name(name) {
            return Err(err(
                line,
                format!("`{name}` is not a worker name (letters, digits, `_` and `-`)"),
            ));
        }
        if directive.is_empty() || directive.contains('.') {
            return Err(err(
                line,
                format!("expected `worker.{name}.<directive>=value`, found `{key}`"),
            ));
        }
        let w = *index.entry(name.to_string()).or_insert_with(|| {
            out.workers.push(Worker {
                name: name.to_string(),
                line,
                props: Vec::new(),
            });
            out.workers.len() - 1
        });
        let props = &mut out.workers[w].props;
        match props.iter_mut().find(|p| p.directive == directive) {
            Some(p) if ACCUMULATE.contains(&directive) => {
                p.value = format!("{},{value}", p.value);
            }
            Some(p) => {
                out.notes.push(format!(
                    "{key} is set on line {} and again on line {line}: the last one counts",
                    p.line
                ));
                p.value = value;
                p.line = line;
            }
            None => props.push(Prop {
                directive: directive.to_string(),
                value,
                line,
                from: None,
            }),
        }
    }
    inherit(&mut out, file)?;
    Ok(out)
}

/// Replaces each `$(name)` with the variable's value (defined above, or else from the
/// environment, as mod_jk does).
fn substitute(
    value: &str,
    vars: &HashMap<String, String>,
    notes: &mut Vec<String>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("$(") {
        let Some(len) = rest[start + 2..].find(')') else {
            break;
        };
        let name = &rest[start + 2..start + 2 + len];
        let v = match vars.get(name) {
            Some(v) => v.clone(),
            None => match std::env::var(name) {
                Ok(v) => {
                    notes.push(format!(
                        "`$({name})` is not set in the file: taken from this shell's environment (`{v}`)"
                    ));
                    v
                }
                Err(_) => {
                    return Err(format!(
                        "`$({name})` is not defined (no `{name}=...` line above, nor in the environment)"
                    ))
                }
            },
        };
        out.push_str(&rest[..start]);
        out.push_str(&v);
        rest = &rest[start + 2 + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `worker.X.reference=worker.T`: X gets every property of T (itself resolved first)
/// that X does not set. At most 20 levels, as in mod_jk.
fn inherit(out: &mut Workers, file: &str) -> Result<(), ImportError> {
    let names: Vec<String> = out.workers.iter().map(|w| w.name.clone()).collect();
    for name in names {
        let mut chain = vec![name.clone()];
        loop {
            let current = chain.last().unwrap();
            let w = out.worker(current).unwrap();
            let Some(r) = w.get("reference") else { break };
            let Some(target) = r.value.strip_prefix("worker.") else {
                return Err(ImportError::at(
                    file,
                    r.line,
                    format!(
                        "`reference` takes the whole prefix, `worker.<name>`: found `{}`",
                        r.value
                    ),
                ));
            };
            let target = target.trim_end_matches('.').to_string();
            if out.worker(&target).is_none() {
                return Err(ImportError::at(
                    file,
                    r.line,
                    format!("worker `{current}` refers to `{target}`, which has no properties"),
                ));
            }
            if chain.contains(&target) || chain.len() > 20 {
                return Err(ImportError::at(
                    file,
                    r.line,
                    format!(
                        "reference loop or more than 20 levels: {} -> {target}",
                        chain.join(" -> ")
                    ),
                ));
            }
            if !out.referenced.contains(&target) {
                out.referenced.push(target.clone());
            }
            chain.push(target);
        }
        // Nearest first: a property set nearer to X wins.
        let mut props = out.worker(&name).unwrap().props.clone();
        for t in &chain[1..] {
            for p in &out.worker(t).unwrap().props {
                if p.directive != "reference" && !props.iter().any(|q| q.directive == p.directive) {
                    props.push(Prop {
                        from: Some(t.clone()),
                        ..p.clone()
                    });
                }
            }
        }
        let w = out.workers.iter_mut().find(|w| w.name == name).unwrap();
        w.props = props;
    }
    Ok(())
}

/// `worker.X.d=value` as the notes say it, with the template it came from.
pub fn said(worker: &str, p: &Prop) -> String {
    match &p.from {
        Some(t) => format!(
            "worker.{worker}.{}={} (from worker.{t})",
            p.directive, p.value
        ),
        None => format!("worker.{worker}.{}={}", p.directive, p.value),
    }
}

/// A directive's value as a whole number.
pub fn number(v: &str) -> Option<i64> {
    v.trim().parse().ok()
}

/// The members a load balancer worker names (`balance_workers`, or the old
/// `balanced_workers`).
pub fn members_of(lb: &Worker) -> Vec<String> {
    ["balance_workers", "balanced_workers"]
        .iter()
        .filter_map(|d| lb.get(d))
        .flat_map(|p| list(&p.value).map(str::to_string).collect::<Vec<_>>())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax() {
        let text = "\
# a comment
ps=\\
base=10.0.0
worker.list=lb   # trailing comment
worker.list = status
worker.tpl.port=8009
worker.tpl.lbfactor=2
worker.n1.reference=worker.tpl
worker.n1.host=$(base).1
worker.n1.lbfactor=5
worker.lb.type=lb
worker.lb.balance_workers=n1
worker.lb.balance_workers=n2, n3
worker.maintain=30
";
        let w = parse(text, "w.properties").unwrap();
        assert_eq!(w.vars[0], ("ps".into(), "\\".into(), 2));
        let list: Vec<&str> = w.list.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(list, ["lb", "status"]);
        let n1 = w.worker("n1").unwrap();
        assert_eq!(n1.get("host").unwrap().value, "10.0.0.1");
        assert_eq!(n1.get("lbfactor").unwrap().value, "5");
        let port = n1.get("port").unwrap();
        assert_eq!((port.value.as_str(), port.line), ("8009", 6));
        assert_eq!(port.from.as_deref(), Some("tpl"));
        let members: Vec<&str> = list_of(&w, "lb", "balance_workers");
        assert_eq!(members, ["n1", "n2", "n3"]);
        assert_eq!(w.globals, [("maintain".into(), "30".into(), 14)]);
        assert_eq!(w.referenced, ["tpl"]);
    }

    fn list_of<'a>(w: &'a Workers, worker: &str, d: &str) -> Vec<&'a str> {
        list(&w.worker(worker).unwrap().get(d).unwrap().value).collect()
    }

    #[test]
    fn malformed_lines_name_their_line() {
        for (text, line, needle) in [
            ("ps=/\nworker.a.port\n", 2, "expected `name=value`"),
            ("\n\n=x\n", 3, "without a name"),
            ("worker.a b.port=1\n", 1, "white space"),
            (
                "worker.a.b.c=1\n",
                1,
                "expected `worker.a.<directive>=value`",
            ),
            ("worker.a$.port=1\n", 1, "not a worker name"),
            ("worker.a.host=$(nope_not_set_anywhere)\n", 1, "not defined"),
            ("worker.a.reference=tpl\n", 1, "whole prefix"),
            (
                "worker.a.reference=worker.b\nworker.b.reference=worker.a\n",
                2,
                "loop",
            ),
            ("worker.a.reference=worker.zz\n", 1, "no properties"),
        ] {
            let e = parse(text, "w.properties").unwrap_err();
            assert_eq!(e.line, Some(line), "{text}: {e}");
            assert!(e.to_string().contains(needle), "{e}");
            assert!(
                e.to_string().starts_with(&format!("w.properties:{line}: ")),
                "{e}"
            );
        }
    }
}
