//! `tether import`: a tether config made from a mod_jk or WebSphere plug-in config.
//!
//! The importers read the source into [`doc::Doc`] (clusters, servers, listeners and
//! routes, each with comments), which is written as YAML to stdout. A setting without a
//! tether equivalent becomes a comment naming it; one that needs a person's decision (an
//! AJP port, a keyring) is a comment starting with `REVIEW:`, also listed on stderr. With
//! the web server's document root, a listener answers what the connector declined from
//! its files (`serve:`), as the web server did.

mod doc;
mod docroot;
mod jk;
mod jk_ajp;
mod jk_docroot;
mod jk_model;
mod jk_mounts;
mod jk_props;
mod jk_routes;
mod jk_settings;
mod jk_timeouts;
mod names;
mod routes;
mod websphere;
mod ws_cluster;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What to import (`tether import ...`).
#[derive(clap::Subcommand, Debug)]
pub enum Source {
    /// Apache mod_jk: workers.properties, and the mounts of uriworkermap.properties and of
    /// httpd.conf's JkMount/JkUnMount lines.
    #[command(name = "mod_jk", alias = "mod-jk", alias = "modjk")]
    ModJk {
        /// workers.properties
        workers: PathBuf,
        /// uriworkermap.properties (JkMountFile)
        uriworkermap: Option<PathBuf>,
        /// An Apache config file whose JkMount/JkUnMount lines (and <VirtualHost>s) to
        /// import; may be given more than once.
        #[arg(long = "jkmount-from", value_name = "HTTPD_CONF")]
        jkmount_from: Vec<PathBuf>,
        /// Apache's DocumentRoot (absolute): what mod_jk declined (JkUnMount, `!`, paths no
        /// mount matches) is answered from its files. Default: the DocumentRoot of the
        /// --jkmount-from files.
        #[arg(long = "document-root", value_name = "DIR")]
        document_root: Option<PathBuf>,
    },
    /// IBM WebSphere's web server plug-in: plugin-cfg.xml.
    Websphere {
        /// plugin-cfg.xml
        plugin_cfg: PathBuf,
        /// The web server's DocumentRoot (absolute): requests no UriGroup matches are
        /// answered from its files.
        #[arg(long = "document-root", value_name = "DIR")]
        document_root: Option<PathBuf>,
    },
}

/// A source file that cannot be imported: where, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportError {
    pub file: String,
    pub line: Option<usize>,
    pub message: String,
}

impl ImportError {
    pub fn at(file: &str, line: usize, message: impl Into<String>) -> ImportError {
        ImportError {
            file: file.to_string(),
            line: Some(line),
            message: message.into(),
        }
    }

    pub fn file(file: &str, message: impl Into<String>) -> ImportError {
        ImportError {
            file: file.to_string(),
            line: None,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ImportError {}

/// A file's bytes as text; bytes that are not UTF-8 are read as ISO-8859-1 (WebSphere
/// writes plugin-cfg.xml in it).
pub fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => bytes.iter().map(|&b| b as char).collect(),
    }
}

fn read(path: &Path) -> Result<(String, String), ImportError> {
    let name = path.display().to_string();
    let bytes =
        std::fs::read(path).map_err(|e| ImportError::file(&name, format!("cannot read: {e}")))?;
    Ok((name, text(&bytes)))
}

/// `--document-root`, checked before any file is read.
fn document_root(dir: Option<&Path>) -> Result<Option<docroot::DocumentRoot>, ImportError> {
    dir.map(docroot::DocumentRoot::flag).transpose()
}

/// The tether config for a mod_jk setup, as YAML text; `document_root`: Apache's, which
/// wins over httpd.conf's `DocumentRoot`.
pub fn mod_jk(
    workers: &Path,
    uriworkermap: Option<&Path>,
    httpd: &[PathBuf],
    document_root: Option<&Path>,
) -> Result<String, ImportError> {
    let root = self::document_root(document_root)?;
    let workers = read(workers)?;
    let map = uriworkermap.map(read).transpose()?;
    let httpd = httpd
        .iter()
        .map(|h| read(h))
        .collect::<Result<Vec<_>, _>>()?;
    let httpd: Vec<(&str, &str)> = httpd
        .iter()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    mod_jk_text_with_root(
        (&workers.0, &workers.1),
        map.as_ref().map(|(f, t)| (f.as_str(), t.as_str())),
        &httpd,
        root.as_ref(),
    )
}

/// [`mod_jk`] over the files' (name, text), without `--document-root`.
pub fn mod_jk_text(
    workers: (&str, &str),
    uriworkermap: Option<(&str, &str)>,
    httpd: &[(&str, &str)],
) -> Result<String, ImportError> {
    mod_jk_text_with_root(workers, uriworkermap, httpd, None)
}

fn mod_jk_text_with_root(
    (wfile, workers): (&str, &str),
    uriworkermap: Option<(&str, &str)>,
    httpd: &[(&str, &str)],
    root: Option<&docroot::DocumentRoot>,
) -> Result<String, ImportError> {
    let parsed = jk_props::parse(workers, wfile)?;
    let mut mounts = jk_mounts::Mounts::default();
    let mut sources = vec![wfile.to_string()];
    if let Some((f, text)) = uriworkermap {
        jk_mounts::uriworkermap(text, f, &mut mounts)?;
        sources.push(f.to_string());
    }
    for (f, text) in httpd {
        jk_mounts::httpd(text, f, &mut mounts)?;
        sources.push(f.to_string());
    }
    let doc = jk::convert(&parsed, mounts, wfile, root)?;
    finish(doc, "mod_jk", &sources)
}

/// The tether config for a WebSphere plug-in's plugin-cfg.xml, as YAML text;
/// `document_root`: the web server's, which answered what no `Uri` matched.
pub fn websphere(plugin_cfg: &Path, document_root: Option<&Path>) -> Result<String, ImportError> {
    let root = self::document_root(document_root)?;
    let (f, text) = read(plugin_cfg)?;
    let doc = websphere::convert(&text, &f, root.as_ref())?;
    finish(doc, "websphere", &[f])
}

/// [`websphere`] over the file's name and text, without `--document-root`.
pub fn websphere_text(file: &str, text: &str) -> Result<String, ImportError> {
    let doc = websphere::convert(text, file, None)?;
    finish(doc, "websphere", &[file.to_string()])
}

/// The config's text, checked by tether's own parser (host names not looked up): the
/// conversion refuses what it cannot express (at the source's line) where it knows the
/// case, and this check catches the rest, so an import never prints a config that
/// `tether -t` would refuse.
fn finish(mut doc: doc::Doc, kind: &str, sources: &[String]) -> Result<String, ImportError> {
    let mut header = vec![
        format!("tether config imported from {} (`tether import {kind}`).", sources.join(", ")),
        "Check it with `tether -t -c FILE`. Settings without a tether equivalent are comments naming them;".into(),
        "comments marked REVIEW need a decision before this config serves traffic.".into(),
        String::new(),
    ];
    header.append(&mut doc.header);
    doc.header = header;
    let yaml = doc.to_yaml();
    let checked =
        tether_plugins::without_name_lookups(|| crate::config::parse(&yaml, "the imported config"));
    if let Err(e) = checked {
        let refused: Vec<String> = e
            .errors
            .iter()
            .filter(|err| !err.message.ends_with(crate::config::NOT_LOOKED_UP))
            .map(|err| format!("  {}: {}", err.path, err.message))
            .collect();
        if !refused.is_empty() {
            return Err(ImportError::file(
                &sources[0],
                format!(
                    "the converted config is one tether would refuse, so it is not printed:\n{}",
                    refused.join("\n")
                ),
            ));
        }
    }
    Ok(yaml)
}

/// `tether import ...`: prints the config, or the error (exit 1).
pub fn run(source: Source) -> ExitCode {
    let result = match &source {
        Source::ModJk {
            workers,
            uriworkermap,
            jkmount_from,
            document_root,
        } => mod_jk(
            workers,
            uriworkermap.as_deref(),
            jkmount_from,
            document_root.as_deref(),
        ),
        Source::Websphere {
            plugin_cfg,
            document_root,
        } => websphere(plugin_cfg, document_root.as_deref()),
    };
    match result {
        Ok(yaml) => {
            print!("{yaml}");
            let review: Vec<&str> = yaml
                .lines()
                .filter_map(|l| l.split_once("REVIEW:").map(|(_, r)| r.trim()))
                .collect();
            if !review.is_empty() {
                eprintln!(
                    "tether import: {} items to review (comments marked REVIEW):",
                    review.len()
                );
                for r in review {
                    eprintln!("  - {r}");
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tether import: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::doc::{Cluster, Doc, Item, Listener, Value};
    use super::*;

    fn server(name: &str, address: &str) -> Item {
        let mut s = Item::default();
        s.set("name", Value::Str(name.into()), None);
        s.set("address", Value::Str(address.into()), None);
        s
    }

    fn doc(servers: Vec<Item>) -> Doc {
        let mut c = Cluster::default();
        c.item.set("name", Value::Str("shop".into()), None);
        c.servers = servers;
        Doc {
            listeners: vec![Listener {
                name: "web".into(),
                address: "127.0.0.1:80".into(),
                cluster: Some("shop".into()),
                ..Listener::default()
            }],
            clusters: vec![c],
            ..Doc::default()
        }
    }

    #[test]
    fn a_converted_config_tether_would_refuse_is_an_error_not_printed() {
        // What no conversion step checks itself (here, a server redirecting to itself) is
        // still caught by tether's own parser before anything is printed.
        let mut a = server("a", "10.0.0.1:8080");
        a.set("redirect", Value::Str("a".into()), None);
        let err = finish(doc(vec![a]), "mod_jk", &["workers.properties".into()]).unwrap_err();
        assert_eq!(err.file, "workers.properties");
        assert!(
            err.message
                .contains("clusters[0].servers[0].redirect: a server cannot redirect to itself"),
            "{err}"
        );
        // A host name is not looked up (the import sends nothing off the machine), and
        // the config that only names hosts is printed.
        let yaml = finish(
            doc(vec![server("b", "tomcat-b.invalid:8080")]),
            "mod_jk",
            &["workers.properties".into()],
        )
        .unwrap();
        assert!(yaml.contains("tomcat-b.invalid:8080"), "{yaml}");
    }
}
