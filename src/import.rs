//! `tether import`: a tether config made from a mod_jk or WebSphere plug-in config.
//!
//! The importers read the source into [`doc::Doc`] (clusters, servers, listeners and
//! routes, each with comments), which is written as YAML to stdout. A setting without a
//! tether equivalent becomes a comment naming it; one that needs a person's decision (an
//! AJP port, a keyring) is a comment starting with `REVIEW:`, also listed on stderr.

mod doc;
mod jk;
mod jk_mounts;
mod jk_props;
mod jk_routes;
mod jk_settings;
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
    },
    /// IBM WebSphere's web server plug-in: plugin-cfg.xml.
    Websphere {
        /// plugin-cfg.xml
        plugin_cfg: PathBuf,
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

/// A file's text; one that is not UTF-8 is read as ISO-8859-1 (WebSphere writes
/// plugin-cfg.xml in it).
fn read(path: &Path) -> Result<String, ImportError> {
    let bytes = std::fs::read(path)
        .map_err(|e| ImportError::file(&path.display().to_string(), format!("cannot read: {e}")))?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => e.into_bytes().iter().map(|&b| b as char).collect(),
    })
}

/// The tether config for a mod_jk setup, as YAML text.
pub fn mod_jk(
    workers: &Path,
    uriworkermap: Option<&Path>,
    httpd: &[PathBuf],
) -> Result<String, ImportError> {
    let wfile = workers.display().to_string();
    let parsed = jk_props::parse(&read(workers)?, &wfile)?;
    let mut mounts = jk_mounts::Mounts::default();
    let mut sources = vec![wfile.clone()];
    if let Some(u) = uriworkermap {
        let f = u.display().to_string();
        jk_mounts::uriworkermap(&read(u)?, &f, &mut mounts)?;
        sources.push(f);
    }
    for h in httpd {
        let f = h.display().to_string();
        jk_mounts::httpd(&read(h)?, &f, &mut mounts)?;
        sources.push(f);
    }
    let doc = jk::convert(&parsed, mounts, &wfile)?;
    Ok(finish(doc, "mod_jk", &sources))
}

/// The tether config for a WebSphere plug-in's plugin-cfg.xml, as YAML text.
pub fn websphere(plugin_cfg: &Path) -> Result<String, ImportError> {
    let f = plugin_cfg.display().to_string();
    let doc = websphere::convert(&read(plugin_cfg)?, &f)?;
    Ok(finish(doc, "websphere", &[f]))
}

fn finish(mut doc: doc::Doc, kind: &str, sources: &[String]) -> String {
    let mut header = vec![
        format!("tether config imported from {} (`tether import {kind}`).", sources.join(", ")),
        "Check it with `tether -t -c FILE`. Settings without a tether equivalent are comments naming them;".into(),
        "comments marked REVIEW need a decision before this config serves traffic.".into(),
        String::new(),
    ];
    header.append(&mut doc.header);
    doc.header = header;
    doc.to_yaml()
}

/// `tether import ...`: prints the config, or the error (exit 1).
pub fn run(source: Source) -> ExitCode {
    let result = match &source {
        Source::ModJk {
            workers,
            uriworkermap,
            jkmount_from,
        } => mod_jk(workers, uriworkermap.as_deref(), jkmount_from),
        Source::Websphere { plugin_cfg } => websphere(plugin_cfg),
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
