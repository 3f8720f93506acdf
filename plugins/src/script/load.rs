//! A script's settings made ready to serve: its source compiled (a syntax error is reported
//! with its file and line) and run once in a VM of its own, as every worker thread will,
//! so a script that does not return its table of phases is refused before it serves.

use super::settings::{Read, Settings};
use super::shared::SharedDict;
use super::vm::{compile, Vm};
use crate::config_error::PluginConfigError;
use serde_yaml::Value;
use std::sync::Arc;

pub fn load(entry: &Value) -> Result<Settings, Vec<PluginConfigError>> {
    let Read {
        mut settings,
        at,
        mut errors,
    } = Settings::read(entry)?;
    match compile(&settings.origin, &settings.source) {
        Ok(b) => settings.bytecode = b.into(),
        Err(message) => {
            errors.push(PluginConfigError::new(at, message));
            return Err(errors);
        }
    }
    // What it returns must be its phases. Its shared dictionary here is a scratch one (the
    // load may write to it).
    let scratch = settings
        .shared
        .as_ref()
        .map(|(name, size)| Arc::new(SharedDict::new(name, *size as u64)));
    match Vm::new(&settings, scratch) {
        Ok(vm) => settings.phases = vm.phases(),
        Err(message) => errors.push(PluginConfigError::new(at, message)),
    }
    if errors.is_empty() {
        Ok(settings)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::super::phase::Phase;
    use super::super::settings::*;
    use super::*;

    fn parse(yaml: &str) -> Result<Settings, Vec<PluginConfigError>> {
        load(&serde_yaml::from_str(yaml).unwrap())
    }

    fn error(yaml: &str) -> String {
        let errors = parse(yaml).unwrap_err();
        errors
            .iter()
            .map(|e| format!("{}: {}", e.path, e.message))
            .collect::<Vec<_>>()
            .join("; ")
    }

    #[test]
    fn a_script_is_compiled_run_and_its_phases_known() {
        let s = parse(
            "{ name: script, source: 'return { request = function(r, ctx) end, log = function() end }' }",
        )
        .unwrap();
        assert_eq!(s.phases, [Phase::Request, Phase::Log]);
        assert_eq!(s.label, "inline");
        assert_eq!(s.on_error, OnError::Continue);
        assert_eq!(s.time_budget, DEFAULT_BUDGET);
    }

    #[test]
    fn bad_scripts_are_refused_with_their_line() {
        let e = error("{ name: script, source: \"return {\\n request = function(r)\\n if then end\\n end }\" }");
        assert!(e.starts_with("source: inline:3:"), "{e}");
        let e = error("{ name: script, source: 'return 42' }");
        assert!(e.contains("must return a table of phase functions"), "{e}");
        let e = error("{ name: script, source: 'return { reqest = function() end }' }");
        assert!(e.contains("unknown phase `reqest`"), "{e}");
        let e = error("{ name: script, source: 'return { request = 1 }' }");
        assert!(e.contains("`request` is not a function"), "{e}");
        let e = error("{ name: script, source: 'error(\"boom\")' }");
        assert!(e.contains("boom"), "{e}");
        // The load itself is under the budget.
        let e = error("{ name: script, source: 'while true do end' }");
        assert!(e.contains("time budget"), "{e}");
        let e = error("{ name: script, file: /nonexistent/x.luau }");
        assert!(
            e.starts_with("file: cannot read /nonexistent/x.luau"),
            "{e}"
        );
        let e = error("{ name: script, source: 'return {}', file: x.luau }");
        assert!(e.contains("exactly one of file, source"), "{e}");
        let e =
            error("{ name: script, source: 'return {}', memory_limit: 10KiB, time_budget: 1h }");
        assert!(e.contains("memory_limit: must be from 1MiB"), "{e}");
        assert!(e.contains("time_budget: must be from 1ms"), "{e}");
        let e = error("{ name: script, source: 'return {}', on_error: explode }");
        assert!(e.contains("unknown variant `explode`"), "{e}");
    }
}
