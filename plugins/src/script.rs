//! `script`: a Luau script's phase functions run as a plugin (`{ name: script, file: ... }`).
//! Each worker thread runs a script in a VM of its own ([`vm::Vm`], made on the thread's
//! first request that needs it), so calls take no lock and a request's `ctx` table stays
//! on its thread from phase to phase (tether refuses scripts with `work_stealing: true`,
//! where a request may change threads). A call that fails (an error, its time budget, its
//! memory limit) is counted and logged, and the request goes on, or is answered 503
//! (`on_error: reject`); a VM that ran out of memory is made again for the next request.

mod io;
mod load;
mod metrics;
mod pattern;
mod phase;
mod plugin;
mod settings;
mod shared;
mod view;
mod vm;

pub use phase::Phase;
pub use settings::{OnError, Settings};

use crate::config_error::PluginConfigError;
use crate::target::KnownTargets;
use crate::{Connection, RequestState, Route};
use metrics::ScriptMetrics;
use mlua::{Table, Value};
use pingora_http::RequestHeader;
use serde_yaml::Value as Yaml;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;
use view::Bound;
use vm::{Failure, Kind, Vm};

pub fn parse(entry: &Yaml, _targets: &KnownTargets) -> Result<Settings, Vec<PluginConfigError>> {
    load::load(entry)
}

/// An answer a script gives: status, fields, body.
type Reply = (u16, Vec<(String, String)>, String);

/// Ids of scripts (per built plugin) and of VMs, never reused.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A VM of this thread, for the script whose id it has while that script lives.
struct Loaded {
    script: u64,
    alive: Weak<()>,
    vm_id: u64,
    vm: Rc<Vm>,
}

thread_local! {
    static VMS: RefCell<Vec<Loaded>> = const { RefCell::new(Vec::new()) };
}

/// A request's `ctx` table in a thread's VM; freed when the request's state is dropped.
struct CtxSlot {
    vm_id: u64,
    slot: i64,
}

impl Drop for CtxSlot {
    fn drop(&mut self) {
        let _ = VMS.try_with(|vms| {
            if let Ok(vms) = vms.try_borrow() {
                if let Some(l) = vms.iter().find(|l| l.vm_id == self.vm_id) {
                    l.vm.drop_ctx(self.slot);
                }
            }
        });
    }
}

pub struct Script {
    id: u64,
    settings: Settings,
    /// Dropped with the plugin: the threads' VMs of it are then dropped at their next look.
    alive: Arc<()>,
    targets: Arc<KnownTargets>,
    shared: Option<Arc<shared::SharedDict>>,
    metrics: ScriptMetrics,
    /// The second (since the epoch) of the last failure logged.
    logged: AtomicU64,
    suppressed: AtomicU64,
}

impl Script {
    pub fn new(settings: Settings, targets: Arc<KnownTargets>) -> Script {
        Script {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            metrics: ScriptMetrics::new(&settings.label),
            shared: settings
                .shared
                .as_ref()
                .map(|(name, size)| shared::SharedDict::named(name, *size as u64)),
            settings,
            alive: Arc::new(()),
            targets,
            logged: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    fn defines(&self, phase: Phase) -> bool {
        self.settings.phases.contains(&phase)
    }

    /// This thread's VM of the script, made if there is none yet.
    fn vm(&self) -> Result<(u64, Rc<Vm>), Failure> {
        let found = VMS.with(|vms| {
            let vms = vms.borrow();
            vms.iter()
                .find(|l| l.script == self.id)
                .map(|l| (l.vm_id, l.vm.clone()))
        });
        if let Some(found) = found {
            return Ok(found);
        }
        let vm = Rc::new(
            Vm::new(&self.settings, self.shared.clone()).map_err(|message| Failure {
                kind: Kind::Error,
                message,
            })?,
        );
        let vm_id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        VMS.with(|vms| {
            let mut vms = vms.borrow_mut();
            // The VMs of scripts a reload dropped go now.
            vms.retain(|l| l.alive.strong_count() > 0);
            vms.push(Loaded {
                script: self.id,
                alive: Arc::downgrade(&self.alive),
                vm_id,
                vm: vm.clone(),
            });
        });
        Ok((vm_id, vm))
    }

    /// Drops this thread's VM of the script (after it ran out of memory).
    fn forget_vm(&self) {
        VMS.with(|vms| vms.borrow_mut().retain(|l| l.script != self.id));
    }

    /// Runs `phase` for a request: what it returned, or the failure (counted and logged).
    fn run(
        &self,
        phase: Phase,
        state: &mut RequestState,
        bind: Bound<'_>,
        extra: impl FnOnce(&mlua::Lua) -> mlua::Result<Value>,
    ) -> Result<Value, Failure> {
        let start = Instant::now();
        let result = self.call(phase, state, bind, extra);
        self.metrics
            .called(phase as usize, start.elapsed().as_secs_f64());
        if let Err(f) = &result {
            self.metrics.failed(phase as usize, f.kind);
            if f.kind == Kind::Memory {
                self.forget_vm();
            }
            self.log_failure(phase, f);
        }
        result
    }

    /// Runs `phase` (`request` or `route`) as a coroutine that may wait: each slice runs on
    /// this thread's VM, and what it waits for is awaited outside the VM (nothing of the VM
    /// is held across an await). `finish` reads what it returned.
    async fn run_waiting<R>(
        &self,
        phase: Phase,
        state: &mut RequestState,
        msg: &mut Msg<'_>,
        finish: impl Fn(&Self, Value) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        let start = Instant::now();
        let mut outcome = None;
        let result = loop {
            let wait = match self.slice(phase, state, msg, outcome.take(), &finish) {
                Ok(Slice::Done(r)) => break Ok(r),
                Ok(Slice::Wait(wait)) => wait,
                Err(f) => break Err(f),
            };
            outcome = Some(wait.await);
        };
        self.metrics
            .called(phase as usize, start.elapsed().as_secs_f64());
        if let Err(f) = &result {
            self.metrics.failed(phase as usize, f.kind);
            if f.kind == Kind::Memory {
                self.forget_vm();
            }
            self.log_failure(phase, f);
        }
        result
    }

    /// One slice of a phase that may wait: its start, or its resumption with `outcome`.
    fn slice<R>(
        &self,
        phase: Phase,
        state: &mut RequestState,
        msg: &mut Msg<'_>,
        outcome: Option<io::Outcome>,
        finish: &impl Fn(&Self, Value) -> Result<R, Failure>,
    ) -> Result<Slice<R>, Failure> {
        let (vm_id, vm) = self.vm()?;
        let slot = match state.get_mut::<CtxSlot>(self.id) {
            Some(s) if s.vm_id == vm_id => s.slot,
            Some(_) if outcome.is_some() => {
                return Err(Failure {
                    kind: Kind::Error,
                    message: "the script's VM was made again while it waited".into(),
                })
            }
            _ => {
                let slot = vm.new_ctx()?;
                state.insert(self.id, CtxSlot { vm_id, slot });
                slot
            }
        };
        let step = match outcome {
            None => vm.start(phase, slot, msg.bound())?,
            Some(o) => vm.resume(slot, msg.bound(), o)?,
        };
        Ok(match step {
            vm::Step::Done(v) => Slice::Done(finish(self, v)?),
            vm::Step::Wait(w) => Slice::Wait(w),
        })
    }

    fn call(
        &self,
        phase: Phase,
        state: &mut RequestState,
        bind: Bound<'_>,
        extra: impl FnOnce(&mlua::Lua) -> mlua::Result<Value>,
    ) -> Result<Value, Failure> {
        let (vm_id, vm) = self.vm()?;
        let slot = match state.get_mut::<CtxSlot>(self.id) {
            Some(s) if s.vm_id == vm_id => s.slot,
            _ => {
                let slot = vm.new_ctx()?;
                state.insert(self.id, CtxSlot { vm_id, slot });
                slot
            }
        };
        let extra = extra(vm.lua()).map_err(|e| Failure {
            kind: Kind::Error,
            message: e.to_string(),
        })?;
        vm.call(phase, slot, bind, extra)
    }

    /// One line per second at most per script; the lines left out are counted in the next.
    fn log_failure(&self, phase: Phase, f: &Failure) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last = self.logged.load(Ordering::Relaxed);
        if last == now || self.logged.swap(now, Ordering::Relaxed) == now {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let more = self.suppressed.swap(0, Ordering::Relaxed);
        log::warn!(
            "script {}: {} phase failed ({}): {}{}",
            self.settings.label,
            phase.name(),
            f.kind.name(),
            f.message,
            if more > 0 {
                format!(" ({more} more failures in the last second)")
            } else {
                String::new()
            }
        );
    }

    /// What a failure in a phase that may answer does: go on, or answer 503.
    fn on_error(&self) -> Option<Reply> {
        (self.settings.on_error == OnError::Reject).then(|| {
            (
                503,
                Vec::new(),
                "503 Service Unavailable: the request could not be checked\n".to_string(),
            )
        })
    }

    /// A table the script returned as an answer: `{ status =, body =, headers = }` or
    /// `{ redirect = url, status = 302 }`.
    fn answer(t: &Table) -> Result<Reply, Failure> {
        let bad = |message: String| Failure {
            kind: Kind::Error,
            message,
        };
        let redirect: Option<String> = t.get("redirect").map_err(|e| bad(e.to_string()))?;
        let default = if redirect.is_some() { 302 } else { 200 };
        let status: Option<u16> = t.get("status").map_err(|e| bad(e.to_string()))?;
        let status = status.unwrap_or(default);
        if !(200..=599).contains(&status) {
            return Err(bad(format!(
                "an answer's status must be 200 to 599, not {status}"
            )));
        }
        let body: Option<String> = t.get("body").map_err(|e| bad(e.to_string()))?;
        let mut headers = Vec::new();
        if let Some(fields) = t
            .get::<Option<Table>>("headers")
            .map_err(|e| bad(e.to_string()))?
        {
            for pair in fields.pairs::<String, String>() {
                let (name, value) = pair.map_err(|e| bad(format!("headers: {e}")))?;
                check_field(&name, &value).map_err(bad)?;
                headers.push((name, value));
            }
        }
        if let Some(to) = redirect {
            check_field("Location", &to).map_err(bad)?;
            headers.push(("Location".into(), to));
        }
        Ok((status, headers, body.unwrap_or_default()))
    }

    /// Where the route phase sends the request: `"cluster"`, `"cluster/server"` or
    /// `{ cluster =, server = }`, only to what the config knows; or an answer.
    fn route_of(&self, value: Value) -> Result<Route, Failure> {
        let bad = |message: String| Failure {
            kind: Kind::Error,
            message,
        };
        let name = match &value {
            Value::Nil => return Ok(Route::Continue),
            Value::String(s) => s.to_str().map_err(|e| bad(e.to_string()))?.to_string(),
            Value::Table(t) if t.contains_key("status").unwrap_or(false) => {
                let (status, headers, body) = Self::answer(t)?;
                return Ok(Route::Respond {
                    status,
                    headers,
                    body,
                });
            }
            Value::Table(t) => {
                let cluster: String = t.get("cluster").map_err(|e| bad(e.to_string()))?;
                match t
                    .get::<Option<String>>("server")
                    .map_err(|e| bad(e.to_string()))?
                {
                    Some(server) => format!("{cluster}/{server}"),
                    None => cluster,
                }
            }
            other => {
                let message = format!("route must return a target, not a {}", other.type_name());
                return Err(bad(message));
            }
        };
        match self.targets.resolve(&name) {
            Some(t) => Ok(Route::To(t)),
            None => Err(bad(format!(
                "route named `{name}`, which the config does not have"
            ))),
        }
    }
}

/// Where a phase that may wait stands after a slice: what its return value says (read on
/// the VM's side: no Lua value is held across an await), or what it waits for.
enum Slice<R> {
    Done(R),
    Wait(io::Wait),
}

/// The request of a phase that may wait, bound again for each slice.
enum Msg<'a> {
    Writable(&'a mut RequestHeader, &'a Connection),
    ReadOnly(&'a RequestHeader, &'a Connection),
}

impl Msg<'_> {
    fn bound(&mut self) -> Bound<'_> {
        match self {
            Msg::Writable(req, conn) => Bound::Request {
                req,
                conn: Some(conn),
            },
            Msg::ReadOnly(req, conn) => Bound::ReadOnly {
                req,
                conn: Some(conn),
            },
        }
    }
}

/// A field a script sets on an answer: a token name and a value without control bytes, and
/// not one of the fields that frame the message (tether writes those).
fn check_field(name: &str, value: &str) -> Result<(), String> {
    let parsed = http::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("`{name}` is not a field name"))?;
    use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
    if [CONTENT_LENGTH, TRANSFER_ENCODING, CONNECTION].contains(&parsed) {
        return Err(format!("an answer's `{name}` is tether's to write"));
    }
    http::HeaderValue::from_str(value)
        .map_err(|_| format!("the value of `{name}` is not valid"))?;
    Ok(())
}
