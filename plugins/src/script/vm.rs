//! One script's Luau VM on one worker thread: sandboxed (read-only libraries and globals,
//! no `require`, `loadstring`, `getfenv`/`setfenv`; Luau has no `io`, no `os` beyond the
//! clock and no bytecode loading), under a memory limit and a time budget per call that an
//! interrupt enforces, its string patterns bounded ([`super::pattern`]). It holds the
//! script's phase functions and the `ctx` tables of the requests in flight on its thread.

use super::io::{self, Outcome, Wait, Waits};
use super::phase::{Phase, PHASES};
use super::settings::Settings;
use super::view::{self, Current};
use mlua::chunk::{ChunkMode, Compiler};
use mlua::thread::ThreadStatus;
use mlua::{Function, IntoLuaMulti, Lua, LuaSerdeExt, MultiValue, Table, Thread, Value, VmState};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How a call failed, as `tether_script_errors_total{kind}` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The script raised an error (or returned something tether cannot use).
    Error,
    /// The call ran past its time budget and was stopped.
    Budget,
    /// The VM reached its memory limit.
    Memory,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Error => "error",
            Kind::Budget => "budget",
            Kind::Memory => "memory",
        }
    }
}

/// A failed call: its kind and the script's message.
#[derive(Debug)]
pub struct Failure {
    pub kind: Kind,
    pub message: String,
}

/// Compiles a script's source to Luau bytecode; a syntax error as `origin:line: message`.
pub fn compile(origin: &str, source: &str) -> Result<Vec<u8>, String> {
    Compiler::new()
        .set_optimization_level(2)
        .compile(source)
        .map_err(|e| match e {
            mlua::Error::SyntaxError { message, .. } => located(origin, &message),
            other => located(origin, &other.to_string()),
        })
}

/// Luau's `[string "..."]:3: message` (or `3: message`) as `origin:3: message`.
fn located(origin: &str, message: &str) -> String {
    let rest = match message.strip_prefix("[string \"") {
        Some(r) => r.split_once("\"]").map_or(message, |(_, r)| r),
        None => message,
    };
    let rest = rest.strip_prefix(':').unwrap_or(rest);
    let line = rest
        .split_once(':')
        .filter(|(n, _)| n.bytes().all(|b| b.is_ascii_digit()));
    match line {
        Some((n, r)) if !n.is_empty() => format!("{origin}:{n}:{r}"),
        _ => format!("{origin}: {rest}"),
    }
}

/// The time budget of the call in progress, checked by the VM's interrupt (which Luau runs
/// at calls and loop back-edges): the clock is read every [`CLOCK_EVERY`] interrupts.
#[derive(Default)]
struct Budget {
    deadline: Cell<Option<Instant>>,
    ticks: Cell<u32>,
    tripped: Cell<bool>,
}

const CLOCK_EVERY: u32 = 64;

pub struct Vm {
    lua: Lua,
    phases: [Option<Function>; 6],
    /// The `ctx` tables by slot: a request's while it is in flight, else cleared and kept
    /// for the next request (a table is made only when none is free).
    ctxs: RefCell<Vec<Table>>,
    free: RefCell<Vec<i64>>,
    /// Finished coroutines, reset and used again by the next phase that may wait.
    spare: RefCell<Vec<Thread>>,
    budget: Rc<Budget>,
    time_budget: Duration,
    request: mlua::AnyUserData,
    response: mlua::AnyUserData,
    waits: Rc<Waits>,
    /// The coroutines of phases waiting (`request`, `route`), by `ctx` slot.
    threads: RefCell<HashMap<i64, Thread>>,
}

/// Where a phase that may wait stands after a slice of it ran.
pub enum Step {
    Done(Value),
    /// Waiting for this, awaited outside the VM; the phase resumes with its outcome.
    Wait(Wait),
}

impl Vm {
    /// A VM with the script loaded: its chunk run (under the budget) and the phase
    /// functions it returned kept. The message says what is wrong with the script.
    pub fn new(
        settings: &Settings,
        shared: Option<std::sync::Arc<super::shared::SharedDict>>,
    ) -> Result<Vm, String> {
        let at = |e: mlua::Error| located(&settings.origin, &message_of(&e));
        let lua = Lua::new();
        lua.set_memory_limit(settings.memory_limit).map_err(at)?;
        let globals = lua.globals();
        for unsafe_global in ["require", "loadstring", "getfenv", "setfenv"] {
            globals.raw_set(unsafe_global, Value::Nil).map_err(at)?;
        }
        super::pattern::bound(&lua).map_err(at)?;
        // The entry's `config`, read-only, as the global `config`.
        let config = lua.to_value(&settings.config).map_err(at)?;
        if let Value::Table(t) = &config {
            t.set_readonly(true);
        }
        globals.raw_set("config", config).map_err(at)?;
        // `http`, `json` and `shared` (before the sandbox makes globals read-only).
        let waits = super::io::install(&lua, settings.http.as_ref(), shared).map_err(at)?;
        lua.sandbox(true).map_err(at)?;
        let budget = Rc::new(Budget::default());
        let watch = budget.clone();
        lua.set_interrupt(move |_| {
            let ticks = watch.ticks.get().wrapping_add(1);
            watch.ticks.set(ticks);
            if ticks % CLOCK_EVERY == 0 {
                if let Some(deadline) = watch.deadline.get() {
                    if Instant::now() >= deadline {
                        watch.tripped.set(true);
                        return Err(mlua::Error::runtime("the script's time budget is spent"));
                    }
                }
            }
            Ok(VmState::Continue)
        });
        let (request, response) = view::objects(&lua).map_err(at)?;
        let mut vm = Vm {
            ctxs: RefCell::new(Vec::new()),
            lua,
            phases: Default::default(),
            free: RefCell::new(Vec::new()),
            spare: RefCell::new(Vec::new()),
            budget,
            time_budget: settings.time_budget,
            request,
            response,
            waits,
            threads: RefCell::new(HashMap::new()),
        };
        let chunk = vm
            .lua
            .load(&settings.bytecode[..])
            .set_name(format!("={}", settings.origin))
            .set_mode(ChunkMode::Binary)
            .into_function()
            .map_err(at)?;
        let returned: Value = vm
            .timed(|| chunk.call(()))
            .map_err(|f| located(&settings.origin, &f.message))?;
        let Value::Table(table) = returned else {
            return Err(format!(
                "{}: the script must return a table of phase functions \
                 (`return {{ request = function(r, ctx) ... end }}`)",
                settings.origin
            ));
        };
        for pair in table.pairs::<Value, Value>() {
            let (key, value) = pair.map_err(at)?;
            let name = key.to_string().unwrap_or_default();
            let Some(i) = PHASES.iter().position(|p| p.name() == name) else {
                let known: Vec<_> = PHASES.iter().map(|p| p.name()).collect();
                return Err(format!(
                    "{}: unknown phase `{name}` (phases: {})",
                    settings.origin,
                    known.join(", ")
                ));
            };
            let Value::Function(f) = value else {
                return Err(format!("{}: `{name}` is not a function", settings.origin));
            };
            vm.phases[i] = Some(f);
        }
        Ok(vm)
    }

    /// The phases the script defines, in order.
    pub fn phases(&self) -> Vec<Phase> {
        PHASES
            .iter()
            .zip(&self.phases)
            .filter(|(_, f)| f.is_some())
            .map(|(p, _)| *p)
            .collect()
    }

    pub fn lua(&self) -> &Lua {
        &self.lua
    }

    /// A new request's `ctx` table: its slot.
    pub fn new_ctx(&self) -> Result<i64, Failure> {
        if let Some(slot) = self.free.borrow_mut().pop() {
            return Ok(slot);
        }
        let table = self.lua.create_table().map_err(failure)?;
        let mut ctxs = self.ctxs.borrow_mut();
        ctxs.push(table);
        Ok(ctxs.len() as i64 - 1)
    }

    /// A request's `ctx` table.
    fn ctx(&self, slot: i64) -> Result<Table, Failure> {
        self.ctxs
            .borrow()
            .get(slot as usize)
            .cloned()
            .ok_or_else(|| Failure {
                kind: Kind::Error,
                message: "no such ctx".into(),
            })
    }

    /// Frees a request's `ctx` table: emptied (and its metatable removed) for the next
    /// request, or replaced when the script froze it.
    pub fn drop_ctx(&self, slot: i64) {
        if let Some(thread) = self.threads.borrow_mut().remove(&slot) {
            self.recycle(thread);
        }
        let mut ctxs = self.ctxs.borrow_mut();
        let Some(table) = ctxs.get_mut(slot as usize) else {
            return;
        };
        let emptied = table.clear().is_ok() && table.set_metatable(None).is_ok();
        if !emptied {
            match self.lua.create_table() {
                Ok(fresh) => *table = fresh,
                Err(_) => return,
            }
        }
        self.free.borrow_mut().push(slot);
    }

    /// Keeps a coroutine that is done for the next phase (a few are enough: one per
    /// request whose phase is running or waiting at once is the most ever needed).
    fn recycle(&self, thread: Thread) {
        let mut spare = self.spare.borrow_mut();
        if spare.len() < 64 {
            spare.push(thread);
        }
    }

    /// Calls `phase` with the request or response object (bound to what `bind` points it
    /// at for the call's length), or `extra` when there is no message (the log phase's
    /// `info`), and the request's `ctx`, under the time budget.
    pub fn call(
        &self,
        phase: Phase,
        slot: i64,
        bind: view::Bound,
        extra: Value,
    ) -> Result<Value, Failure> {
        let Some(f) = &self.phases[phase as usize] else {
            return Ok(Value::Nil);
        };
        let ctx = self.ctx(slot)?;
        // The first argument: the phase's message, or (the log phase) `extra`.
        let first = match bind {
            view::Bound::Response(_) => Value::UserData(self.response.clone()),
            view::Bound::Nothing => extra,
            _ => Value::UserData(self.request.clone()),
        };
        let current = self
            .lua
            .app_data_ref::<Rc<Current>>()
            .map(|c| c.clone())
            .expect("set with the objects");
        let _bound = current.bind(bind);
        self.timed(|| f.call((first, ctx)))
    }

    /// Starts `phase` as a coroutine that may wait (`request`, `route`), with the request
    /// object bound to `bind` while it runs; where it stands when it returns or waits.
    pub fn start(&self, phase: Phase, slot: i64, bind: view::Bound) -> Result<Step, Failure> {
        let Some(f) = &self.phases[phase as usize] else {
            return Ok(Step::Done(Value::Nil));
        };
        let reused = self.spare.borrow_mut().pop();
        let thread = match reused {
            Some(t) => {
                t.reset(f.clone()).map_err(failure)?;
                t
            }
            None => self.lua.create_thread(f.clone()).map_err(failure)?,
        };
        let ctx = self.ctx(slot)?;
        let args = (Value::UserData(self.request.clone()), ctx);
        let args = args.into_lua_multi(&self.lua).map_err(failure)?;
        self.step(slot, thread, bind, args)
    }

    /// Resumes the waiting phase of `slot` with what its wait ended with.
    pub fn resume(&self, slot: i64, bind: view::Bound, outcome: Outcome) -> Result<Step, Failure> {
        let thread = self.threads.borrow_mut().remove(&slot);
        let Some(thread) = thread else {
            return Err(Failure {
                kind: Kind::Error,
                message: "the script's VM was made again while it waited".into(),
            });
        };
        let args = io::resume_values(&self.lua, outcome).map_err(failure)?;
        self.step(slot, thread, bind, args)
    }

    fn step(
        &self,
        slot: i64,
        thread: Thread,
        bind: view::Bound,
        args: MultiValue,
    ) -> Result<Step, Failure> {
        let current = self
            .lua
            .app_data_ref::<Rc<Current>>()
            .map(|c| c.clone())
            .expect("set with the objects");
        let _bound = current.bind(bind);
        self.waits.set_open(true);
        let result = self.timed(|| thread.resume::<MultiValue>(args));
        let yielded = thread.status() == ThreadStatus::Resumable;
        // The wait a yield names is taken out before the VM closes (which drops what else
        // this slice started): nothing started here outlives the slice but that one.
        let step = match result {
            Ok(values) if yielded => self.wait_of(values),
            Ok(values) => Ok(Step::Done(values.into_iter().next().unwrap_or(Value::Nil))),
            Err(e) => Err(e),
        };
        self.waits.set_open(false);
        match step {
            Ok(Step::Wait(_)) => {
                self.threads.borrow_mut().insert(slot, thread);
            }
            _ => self.recycle(thread),
        }
        step
    }

    /// The wait a phase's yield names (kept for resuming with the thread).
    fn wait_of(&self, values: MultiValue) -> Result<Step, Failure> {
        let mut values = values.into_iter();
        let id = match (values.next(), values.next()) {
            (Some(Value::String(m)), Some(id)) if m.as_bytes().as_ref() == b"tether:wait" => {
                match id {
                    Value::Integer(id) => Some(id as u64),
                    Value::Number(id) => Some(id as u64),
                    _ => None,
                }
            }
            _ => None,
        };
        let Some(id) = id else {
            return Err(Failure {
                kind: Kind::Error,
                message: "the phase yielded (coroutine.yield) outside tether's waits".into(),
            });
        };
        match self.waits.take(id) {
            Some(wait) => Ok(Step::Wait(wait)),
            None => Err(Failure {
                kind: Kind::Error,
                message: "a wait the script yielded is not known".into(),
            }),
        }
    }

    /// Runs `call` under the time budget.
    fn timed<R>(&self, call: impl FnOnce() -> mlua::Result<R>) -> Result<R, Failure> {
        self.budget.tripped.set(false);
        self.budget.ticks.set(0);
        self.budget
            .deadline
            .set(Some(Instant::now() + self.time_budget));
        let result = call();
        self.budget.deadline.set(None);
        result.map_err(|e| {
            let mut f = failure(e);
            if self.budget.tripped.get() {
                f.kind = Kind::Budget;
            }
            f
        })
    }
}

fn failure(e: mlua::Error) -> Failure {
    let kind = if is_memory(&e) {
        Kind::Memory
    } else {
        Kind::Error
    };
    Failure {
        kind,
        message: message_of(&e),
    }
}

fn is_memory(e: &mlua::Error) -> bool {
    match e {
        mlua::Error::MemoryError(_) => true,
        mlua::Error::CallbackError { cause, .. } => is_memory(cause),
        mlua::Error::WithContext { cause, .. } => is_memory(cause),
        _ => false,
    }
}

/// The first line of an error's message: the script's own words, without a traceback.
fn message_of(e: &mlua::Error) -> String {
    let text = match e {
        mlua::Error::CallbackError { cause, .. } => return message_of(cause),
        mlua::Error::MemoryError(_) => "the script's memory limit is reached".to_string(),
        other => other.to_string(),
    };
    text.lines().next().unwrap_or("").to_string()
}
