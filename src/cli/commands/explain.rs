//! `tether explain -c FILE 'GET /shop;jsessionid=ABC.n1' -H 'Cookie: ...'`: what tether
//! would do with a request under a config file, every server up and no session yet seen,
//! printed as the admin API's `POST /explain` prints it (to review a change before it
//! ships).

use crate::config::Config;
use crate::services::explain::{explain, Ask};
use crate::state::snapshot::Snapshot;
use std::process::ExitCode;

/// `request`: `METHOD URL` or `URL`; `fields`: `Name: value`.
pub fn run(
    config: &Config,
    request: &str,
    fields: &[String],
    listener: Option<String>,
) -> ExitCode {
    let (method, url) = match request.trim().split_once(' ') {
        Some((m, u)) => (m.to_string(), u.trim().to_string()),
        None => ("GET".to_string(), request.trim().to_string()),
    };
    let mut headers = Vec::new();
    for f in fields {
        let Some((name, value)) = f.split_once(':') else {
            eprintln!("tether explain: `{f}` is not `Name: value`");
            return ExitCode::from(2);
        };
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let ask = Ask {
        listener,
        method,
        url,
        headers,
    };
    let snapshot = Snapshot::build(config, None);
    match explain(config, &snapshot, &ask) {
        Ok(answer) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&answer).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tether explain: {e}");
            ExitCode::from(2)
        }
    }
}
