//! tether's YAML configuration: raw serde types, validation into internal types, errors.
//!
//! Loading happens in three steps: the text is parsed into a YAML tree (syntax errors stop
//! here), each section and list item is deserialised into the raw types of [`raw`] on its
//! own (so one bad server does not hide the next), and [`validate`] turns the raw types into
//! the internal [`model`] types, collecting every semantic error. All errors carry the path
//! of the field and, through [`locate`], the line and column in the file.

pub mod import;

mod check;
mod client_limits;
mod compress;
pub use compress::{Compress, DEFAULT_TYPES as DEFAULT_COMPRESSED_TYPES};
mod clusters;
mod error;
mod error_pages;
mod http3;
mod listener_model;
mod locate;
pub mod model;
mod operations;
pub mod pem;
mod queue;
mod raw;
mod raw_items;
mod raw_tls;
pub use error_pages::{ErrorPages, Page};
mod resolver;
mod retry;
mod routes;
mod serve;
pub use serve::{Files, Symlinks};
pub mod shared_state;
mod tls;
mod validate;

pub use check::written_duration;
pub use clusters::{is_token, usable_clone_id, usable_route};
pub use error::{ConfigError, ConfigErrors};
pub use model::*;
pub use tether_plugins::parse_duration;
pub use tether_plugins::{no_name_lookups, NOT_LOOKED_UP};

use std::path::Path;

/// The config's warnings as lines `FILE:LINE:COL: warning: PATH: MESSAGE`.
pub fn warning_lines(config: &Config, file: &str) -> Vec<String> {
    config
        .warnings
        .iter()
        .map(|w| match w.position {
            Some((l, c)) => format!("{file}:{l}:{c}: warning: {}: {}", w.path, w.message),
            None => format!("{file}: warning: {}: {}", w.path, w.message),
        })
        .collect()
}

/// Reads, parses and validates a config file.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigErrors::new(
            file.clone(),
            vec![ConfigError::new("", format!("cannot read file: {e}"))],
        )
    })?;
    parse(&text, &file)
}

/// A YAML error's position, inside the file: libyaml reports an error at the end of a file
/// that does not end in a line break on the line after its last (found by the `config_yaml`
/// fuzz target); that is the end of its last line. Lines end as in YAML (CR LF, CR, LF).
fn within(text: &str, line: usize, column: usize) -> (usize, usize) {
    let breaks = text.replace("\r\n", "\n").matches(['\r', '\n']).count();
    if line <= breaks + 1 {
        return (line, column);
    }
    let last = text.rsplit(['\r', '\n']).next().unwrap_or("");
    (breaks + 1, last.chars().count() + 1)
}

/// Parses and validates config text; `file` names the source in error messages.
pub fn parse(text: &str, file: &str) -> Result<Config, ConfigErrors> {
    let fail = |errors: Vec<ConfigError>| ConfigErrors::new(file.to_string(), errors);
    let tree: serde_yaml::Value = match serde_yaml::from_str(text) {
        Ok(tree) => tree,
        Err(e) => {
            let message = raw_items::strip_position(&e.to_string());
            let mut err = ConfigError::new("", format!("YAML syntax error: {message}"));
            err.position = e.location().map(|l| within(text, l.line(), l.column()));
            return Err(fail(vec![err]));
        }
    };
    let positions = locate::Positions::index(text);
    let mut errors = Vec::new();
    let raw = raw::RawConfig::from_tree(tree, &mut errors);
    let mut config = validate::validate(raw, &mut errors);
    if errors.is_empty() {
        for w in &mut config.warnings {
            w.position = positions.find(&w.path);
        }
        Ok(config)
    } else {
        for err in &mut errors {
            if err.position.is_none() {
                err.position = positions.find(&err.path);
            }
            // The YAML parser may place an error just past the end (a tagged empty
            // value, `!!- `): on the file's last line instead.
            err.position = err.position.map(|(l, c)| within(text, l, c));
        }
        errors.sort_by_key(|e| e.position.unwrap_or((usize::MAX, 0)));
        Err(fail(errors))
    }
}

/// Is `ip` in one of `nets` (the config's CIDR lists)? An IPv4 address seen on an IPv6
/// socket (`::ffff:a.b.c.d`) is matched as the IPv4 address.
pub fn in_cidrs(ip: std::net::IpAddr, nets: &[ipnet::IpNet]) -> bool {
    let ip = match ip {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
        v4 => v4,
    };
    nets.iter().any(|net| net.contains(&ip))
}
