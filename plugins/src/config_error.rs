//! The error a plugin's config parser gives: below the registry, which every parser's
//! result goes up to.

/// A problem in one plugin's config; `path` is relative to the plugin's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfigError {
    pub path: String,
    pub message: String,
}

impl PluginConfigError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        PluginConfigError {
            path: path.into(),
            message: message.into(),
        }
    }
}
