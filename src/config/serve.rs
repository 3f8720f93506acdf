//! `serve:`: files from a directory, as a route's action or as what a listener does with the
//! requests no route takes (the web server's `DocumentRoot` behind mod_jk's `JkUnMount`).

use super::check::Check;
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;

/// `serve:` as written.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawServe {
    pub root: String,
    pub strip_prefix: Option<String>,
    pub index: Option<Vec<String>>,
    pub cache_control: Option<String>,
    pub precompressed: Option<bool>,
    pub dot_files: Option<bool>,
    pub symlinks: Option<String>,
}

/// Which symbolic links under the root are followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symlinks {
    /// Those that resolve to a place under the root (the default).
    Inside,
    /// Any (the operator trusts everything the root links to).
    Any,
}

/// Files from a directory: validated `serve:`.
#[derive(Debug, Clone, PartialEq)]
pub struct Files {
    /// The directory; a request's path is looked up under it.
    pub root: PathBuf,
    /// Taken off the request's path before the lookup (nginx's `alias`); `None`: the whole
    /// path is looked up (nginx's `root`, httpd's `DocumentRoot`).
    pub strip_prefix: Option<String>,
    /// Files tried, in order, for a path that names a directory.
    pub index: Vec<String>,
    /// `Cache-Control` of every file answer; `None`: none sent.
    pub cache_control: Option<String>,
    /// Send `name.br` or `name.gz` in place of `name` to a client that takes the coding.
    pub precompressed: bool,
    /// Serve names that start with `.` (otherwise 404).
    pub dot_files: bool,
    pub symlinks: Symlinks,
}

/// Validates `raw` (at `path`, the `serve` field's own path).
pub(super) fn files(raw: &RawServe, path: &str, check: &mut Check) -> Arc<Files> {
    let root = PathBuf::from(&raw.root);
    if !root.is_absolute() {
        check.err(format!("{path}.root"), "must be an absolute path");
    } else if !root.is_dir() {
        check.err(
            format!("{path}.root"),
            format!("`{}` is not a directory tether can read", raw.root),
        );
    }
    if let Some(prefix) = &raw.strip_prefix {
        if !prefix.starts_with('/') || prefix.len() < 2 {
            check.err(
                format!("{path}.strip_prefix"),
                "a path prefix that starts with `/` (such as `/static`)",
            );
        }
    }
    let index = raw
        .index
        .clone()
        .unwrap_or_else(|| vec!["index.html".into()]);
    for (i, name) in index.iter().enumerate() {
        let plain =
            !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0']);
        if !plain {
            check.err(
                format!("{path}.index[{i}]"),
                format!("`{name}` is not a file name"),
            );
        }
    }
    if let Some(value) = &raw.cache_control {
        if http::HeaderValue::from_str(value).is_err() || value.is_empty() {
            check.err(
                format!("{path}.cache_control"),
                format!("`{value}` is not a header value"),
            );
        }
    }
    let symlinks = match raw.symlinks.as_deref() {
        None | Some("inside") => Symlinks::Inside,
        Some("any") => Symlinks::Any,
        Some(other) => {
            check.err(
                format!("{path}.symlinks"),
                format!("`{other}`: expected `inside` or `any`"),
            );
            Symlinks::Inside
        }
    };
    Arc::new(Files {
        root,
        strip_prefix: raw
            .strip_prefix
            .as_ref()
            .map(|p| p.trim_end_matches('/').to_owned()),
        index,
        cache_control: raw.cache_control.clone(),
        precompressed: raw.precompressed.unwrap_or(false),
        dot_files: raw.dot_files.unwrap_or(false),
        symlinks,
    })
}
