//! The same Lua code on Luau or Lua 5.4 (whichever this build has), called from Rust as
//! tether calls a script's phase: a no-op phase, a routing phase (a cookie and a field
//! read through a request object's methods, a user looked up in a table), and a phase
//! that works (string building, a table filled and sorted). Prints nanoseconds per call.

use mlua::{Function, Lua, UserData, UserDataFields, UserDataMethods, Value};
use std::time::Instant;

/// A request object with tether's methods over a fixed request.
struct Request {
    cookie: &'static str,
    user: &'static str,
}

impl UserData for Request {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        fields.add_field_method_get("path", |_, _| Ok("/shop/cart"));
    }

    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("header", |_, this, name: String| {
            Ok((name.eq_ignore_ascii_case("x-user")).then_some(this.user))
        });
        methods.add_method("cookie", |_, this, name: String| {
            Ok(this.cookie.split(';').find_map(|pair| {
                let (k, v) = pair.trim().split_once('=')?;
                (k == name).then(|| v.to_string())
            }))
        });
    }
}

const SCRIPT: &str = r#"
local users = {}
for i = 1, 1000 do users[string.format("%03d", i)] = (i % 2 == 0) and "shop/b" or "shop/a" end
return {
  noop = function(r, ctx) end,
  route = function(r, ctx)
    if r:cookie("canary") == "1" then return "shop/b" end
    local user = r:header("x-user")
    ctx.user = user
    return user and users[user]
  end,
  work = function(r, ctx)
    local parts = {}
    for i = 1, 50 do parts[#parts + 1] = tostring((i * 7919) % 1000) end
    table.sort(parts)
    return table.concat(parts, ",")
  end,
}
"#;

fn main() -> mlua::Result<()> {
    let lua = Lua::new();
    // As tether runs Luau: compiled at optimisation level 2, then sandboxed (which also
    // lets the compiler's fast paths for built-in libraries apply).
    #[cfg(feature = "luau")]
    lua.set_compiler(mlua::chunk::Compiler::new().set_optimization_level(2));
    let phases: mlua::Table = lua.load(SCRIPT).eval()?;
    #[cfg(feature = "luau")]
    lua.sandbox(true)?;
    let request = lua.create_userdata(Request {
        cookie: "JSESSIONID=ABC.tc1; theme=dark",
        user: "042",
    })?;
    let vm = if cfg!(feature = "luau") { "Luau" } else { "Lua 5.4" };
    for name in ["noop", "route", "work"] {
        let f: Function = phases.get(name)?;
        let ctx = lua.create_table()?;
        let iters = if name == "work" { 200_000 } else { 2_000_000 };
        // Warm up, then the best of five runs.
        let mut best = f64::MAX;
        for _ in 0..6 {
            let start = Instant::now();
            for _ in 0..iters {
                let v: Value = f.call((&request, &ctx))?;
                std::hint::black_box(v);
            }
            best = best.min(start.elapsed().as_nanos() as f64 / iters as f64);
        }
        println!("{vm}\t{name}\t{best:.0} ns/call");
    }
    Ok(())
}
