//! Config errors: each names the field by path and, where known, its line and column.

use std::fmt;

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Path of the offending field, e.g. `clusters[0].servers[1].weight`; empty for the file.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// 1-based line and column, when the YAML gives them.
    pub position: Option<(usize, usize)>,
}

impl ConfigError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            path: path.into(),
            message: message.into(),
            position: None,
        }
    }
}

/// Every problem found in one config file, reported together.
#[derive(Debug, Clone, thiserror::Error)]
pub struct ConfigErrors {
    /// The file (or other source) the errors are in.
    pub file: String,
    pub errors: Vec<ConfigError>,
}

impl ConfigErrors {
    pub fn new(file: String, errors: Vec<ConfigError>) -> Self {
        ConfigErrors { file, errors }
    }

    /// True when some error is at `path` and its message contains `needle` (for tests).
    pub fn has(&self, path: &str, needle: &str) -> bool {
        self.errors
            .iter()
            .any(|e| e.path == path && e.message.contains(needle))
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        writeln!(
            f,
            "{}: {n} error{}",
            self.file,
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.errors {
            write!(f, "{}", self.file)?;
            if let Some((line, col)) = e.position {
                write!(f, ":{line}:{col}")?;
            }
            if e.path.is_empty() {
                writeln!(f, ": {}", e.message)?;
            } else {
                writeln!(f, ": {}: {}", e.path, e.message)?;
            }
        }
        Ok(())
    }
}
