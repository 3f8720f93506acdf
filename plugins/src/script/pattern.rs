//! String patterns that cannot pin a thread. Luau's interrupt does not fire inside
//! `string.find`, `match`, `gmatch` and `gsub`, and a pattern with several repetitions over
//! a long subject backtracks for minutes (`("a"):rep(1e5):find(".-.-.-b")`). Each of them is
//! wrapped: before the match runs, its worst case is bounded by the subject's length to the
//! power of the pattern's repetitions (`*`, `+`, `-`, `?`, `%b`, back-references), plus one
//! for the start positions of an unanchored search, and a call whose bound passes
//! [`MAX_STEPS`] is refused with an error that says so. A plain `find` (fourth argument
//! true) is linear and always runs.

use mlua::{Function, Lua, MultiValue, Table, Value};

/// The most steps a pattern call may take in its worst case (about 0.1 s of matching): a
/// subject of 10,000 bytes for one repetition, 464 for two, 100 for three, unanchored.
pub const MAX_STEPS: f64 = 1e8;

/// Wraps the string library's pattern functions (before the VM is sandboxed).
pub fn bound(lua: &Lua) -> mlua::Result<()> {
    let string: Table = lua.globals().get("string")?;
    for name in ["find", "match", "gmatch", "gsub"] {
        let original: Function = string.get(name)?;
        let plain_arg = (name == "find").then_some(3);
        let wrapped = lua.create_function(move |_, args: MultiValue| {
            check(name, &args, plain_arg)?;
            original.call::<MultiValue>(args)
        })?;
        string.set(name, wrapped)?;
    }
    Ok(())
}

fn check(name: &str, args: &MultiValue, plain_arg: Option<usize>) -> mlua::Result<()> {
    let (Some(Value::String(subject)), Some(Value::String(pattern))) = (args.front(), args.get(1))
    else {
        // Numbers are coerced by the original, which also reports wrong types.
        return Ok(());
    };
    if let Some(i) = plain_arg {
        if args
            .get(i)
            .is_some_and(|v| !matches!(v, Value::Nil | Value::Boolean(false)))
        {
            return Ok(());
        }
    }
    let pattern = pattern.as_bytes();
    let n = subject.as_bytes().len().max(1) as f64;
    let (repeats, anchored) = repetitions(&pattern);
    // `gmatch` reads `^` as a plain character.
    let anchored = anchored && name != "gmatch";
    let exponent = repeats + u32::from(!anchored);
    let steps = n.powi(exponent as i32);
    if steps > MAX_STEPS {
        return Err(mlua::Error::runtime(format!(
            "string.{name}: a pattern with {repeats} repetitions over {} bytes could take \
             {steps:.0e} steps (at most {MAX_STEPS:.0e}): shorten the subject, anchor the \
             pattern with `^`, or use string.find(s, p, 1, true) for plain text",
            n as u64
        )));
    }
    Ok(())
}

/// The repetitions of a Lua pattern (items that may backtrack) and whether it is anchored.
fn repetitions(p: &[u8]) -> (u32, bool) {
    let anchored = p.first() == Some(&b'^');
    let mut i = usize::from(anchored);
    let mut repeats = 0u32;
    while i < p.len() {
        match p[i] {
            b'%' => {
                match p.get(i + 1) {
                    // `%bxy` scans for its closing pair; `%1`..`%9` compare a capture.
                    Some(b'b') => {
                        repeats += 1;
                        i += 4;
                        continue;
                    }
                    Some(b'1'..=b'9') => repeats += 1,
                    Some(b'f') => {
                        // `%f[set]`: a frontier, no repetition; skip its set.
                        i = skip_set(p, i + 2);
                        continue;
                    }
                    _ => {}
                }
                i += 2;
            }
            b'[' => i = skip_set(p, i),
            b'*' | b'+' | b'-' | b'?' => {
                repeats += 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    (repeats, anchored)
}

/// The index after a `[set]` starting at `i` (or the end of the pattern).
fn skip_set(p: &[u8], mut i: usize) -> usize {
    if p.get(i) != Some(&b'[') {
        return i;
    }
    i += 1;
    if p.get(i) == Some(&b'^') {
        i += 1;
    }
    // A `]` first in the set is a member.
    if p.get(i) == Some(&b']') {
        i += 1;
    }
    while i < p.len() && p[i] != b']' {
        i += if p[i] == b'%' { 2 } else { 1 };
    }
    i + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetitions_are_counted_outside_sets_and_escapes() {
        assert_eq!(repetitions(b"abc"), (0, false));
        assert_eq!(repetitions(b"^/api/(%w+)/(%d+)$"), (2, true));
        assert_eq!(repetitions(b".-.-.-b"), (3, false));
        assert_eq!(repetitions(b"[*+-?]%*%-"), (0, false));
        assert_eq!(repetitions(b"[^;]+"), (1, false));
        assert_eq!(repetitions(b"%b()"), (1, false));
        assert_eq!(repetitions(b"(a)%1"), (1, false));
        assert_eq!(repetitions(b"%f[%w]%w+"), (1, false));
        assert_eq!(repetitions(b"[]]*"), (1, false));
    }

    #[test]
    fn costly_calls_are_refused_and_cheap_ones_run() {
        let lua = Lua::new();
        bound(&lua).unwrap();
        let run = |code: &str| lua.load(code).eval::<Value>();
        // A path match, a cookie value: cheap.
        let v = run(r#"return string.match("/api/users/42", "^/api/(%w+)/(%d+)$")"#).unwrap();
        assert_eq!(v.to_string().unwrap(), "users");
        let v = run(r#"return ("sid=abc; x=1"):match("sid=([^;]+)")"#).unwrap();
        assert_eq!(v.to_string().unwrap(), "abc");
        // The catastrophic one is refused at once, through the method syntax too.
        let e = run(r#"return string.rep("a", 100000):find(".-.-.-b")"#).unwrap_err();
        assert!(
            e.to_string().contains("3 repetitions over 100000 bytes"),
            "{e}"
        );
        let e = run(r#"return string.gsub(string.rep("a", 20000), "a-a-b", "")"#).unwrap_err();
        assert!(e.to_string().contains("string.gsub"), "{e}");
        // Plain text search is linear and always allowed.
        let v = run(r#"return string.find(string.rep("a", 100000), ".-.-.-b", 1, true)"#);
        assert!(matches!(v, Ok(Value::Nil)), "{v:?}");
    }
}
