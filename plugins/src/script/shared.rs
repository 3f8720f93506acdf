//! Dictionaries shared by every worker thread of the process (a script's `shared`), by
//! name: scripts that name the same one share it, and a reload keeps it. Entries are
//! strings, numbers or booleans with an optional time to live; the dictionary is bounded
//! in bytes (keys and values) and evicts the least useful entries past it (moka's TinyLFU).
//! `incr` is atomic per key. Reported (at a scrape) as `tether_script_shared_entries{dict}`,
//! `tether_script_shared_bytes{dict}` and `tether_script_shared_evictions_total{dict}`.

use mlua::{UserData, UserDataMethods, Value};
use moka::notification::RemovalCause;
use moka::ops::compute::Op;
use once_cell::sync::Lazy;
use prometheus::{register_int_counter_vec, IntCounterVec, IntGaugeVec};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest key and string value (bytes).
pub const MAX_KEY: usize = 256;
pub const MAX_VALUE: usize = 64 << 10;

/// Entries and bytes of the process's dictionaries, read at a scrape (after the
/// dictionary's pending bookkeeping is done, so the figures are exact).
struct Figures {
    entries: IntGaugeVec,
    bytes: IntGaugeVec,
}

impl prometheus::core::Collector for Figures {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.entries
            .desc()
            .into_iter()
            .chain(self.bytes.desc())
            .collect()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let dicts: Vec<_> = DICTS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for d in dicts {
            d.cache.run_pending_tasks();
            let labels = [d.name.as_str()];
            self.entries
                .with_label_values(&labels)
                .set(d.cache.entry_count() as i64);
            self.bytes
                .with_label_values(&labels)
                .set(d.cache.weighted_size() as i64);
        }
        let mut out = self.entries.collect();
        out.extend(self.bytes.collect());
        out
    }
}

static FIGURES: Lazy<()> = Lazy::new(|| {
    let gauge = |name: &str, help: &str| {
        IntGaugeVec::new(prometheus::Opts::new(name, help), &["dict"]).expect("valid gauge")
    };
    let figures = Figures {
        entries: gauge(
            "tether_script_shared_entries",
            "Entries in a scripts' shared dictionary.",
        ),
        bytes: gauge(
            "tether_script_shared_bytes",
            "Bytes a scripts' shared dictionary counts against its size (keys, values, 32 per entry).",
        ),
    };
    prometheus::register(Box::new(figures)).expect("register tether_script_shared_*");
});

static EVICTIONS: Lazy<IntCounterVec> = Lazy::new(|| {
    register_int_counter_vec!(
        "tether_script_shared_evictions_total",
        "Entries a scripts' shared dictionary dropped to stay within its size.",
        &["dict"]
    )
    .expect("register tether_script_shared_evictions_total")
});

/// A value and when it expires.
#[derive(Clone, Debug)]
struct Entry {
    data: Data,
    expires: Option<Instant>,
}

#[derive(Clone, Debug, PartialEq)]
enum Data {
    Text(Arc<str>),
    Number(f64),
    Bool(bool),
}

impl Data {
    fn size(&self) -> usize {
        match self {
            Data::Text(s) => s.len(),
            _ => 8,
        }
    }
}

struct Ttl;

impl moka::Expiry<Arc<str>, Entry> for Ttl {
    fn expire_after_create(&self, _: &Arc<str>, e: &Entry, now: Instant) -> Option<Duration> {
        e.expires.map(|at| at.saturating_duration_since(now))
    }

    fn expire_after_update(
        &self,
        _: &Arc<str>,
        e: &Entry,
        now: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        e.expires.map(|at| at.saturating_duration_since(now))
    }
}

/// A load in flight: since when, and what its waiters watch.
type Loading = (Instant, tokio::sync::watch::Sender<bool>);

pub struct SharedDict {
    name: String,
    /// Keys a `get_or_load` is loading now: since when, and what its waiters watch.
    loading: Mutex<HashMap<Arc<str>, Loading>>,
    max_bytes: u64,
    cache: moka::sync::Cache<Arc<str>, Entry>,
}

/// Every dictionary of the process, by name (taken when scripts are built).
static DICTS: Lazy<Mutex<HashMap<String, Arc<SharedDict>>>> = Lazy::new(Default::default);

impl SharedDict {
    /// The process's dictionary `name` of `max_bytes`: the one already there when its
    /// size is the same (a reload keeps its entries), a new one otherwise.
    pub fn named(name: &str, max_bytes: u64) -> Arc<SharedDict> {
        let mut dicts = DICTS.lock().unwrap_or_else(|p| p.into_inner());
        // Dictionaries no script holds any more (a reload dropped them) go.
        dicts.retain(|_, d| Arc::strong_count(d) > 1);
        if let Some(d) = dicts.get(name).filter(|d| d.max_bytes == max_bytes) {
            return d.clone();
        }
        Lazy::force(&FIGURES);
        let dict = Arc::new(SharedDict::new(name, max_bytes));
        dicts.insert(name.to_string(), dict.clone());
        dict
    }

    /// A dictionary of no process (for checking a script when the config is loaded).
    pub fn new(name: &str, max_bytes: u64) -> SharedDict {
        let evictions = EVICTIONS.with_label_values(&[name]);
        // (Counted for checked scripts too: they may fill theirs at load; rarely.)
        SharedDict {
            name: name.to_string(),
            loading: Mutex::new(HashMap::new()),
            max_bytes,
            cache: moka::sync::Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|k: &Arc<str>, v: &Entry| (k.len() + v.data.size() + 32) as u32)
                .expire_after(Ttl)
                .eviction_listener(move |_, _, cause| {
                    if cause == RemovalCause::Size {
                        evictions.inc();
                    }
                })
                .build(),
        }
    }

    /// Claims the load of `key`: `None` when the caller is to load it (no load in flight,
    /// or the one in flight is older than `stale` and taken as abandoned), else a wait that
    /// ends when the load in flight does.
    pub fn claim(
        &self,
        key: &str,
        stale: Duration,
    ) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        let mut loading = self.loading.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((since, tx)) = loading.get(key) {
            if since.elapsed() < stale {
                let mut rx = tx.subscribe();
                return Some(async move {
                    let _ = rx.wait_for(|done| *done).await;
                });
            }
        }
        let (tx, _) = tokio::sync::watch::channel(false);
        loading.insert(Arc::from(key), (Instant::now(), tx));
        None
    }

    /// Ends the load of `key`: its waiters go on.
    pub fn finish(&self, key: &str) {
        let mut loading = self.loading.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, tx)) = loading.remove(key) {
            let _ = tx.send(true);
        }
    }

    fn get(&self, key: &str) -> Option<Data> {
        self.cache.get(key).map(|e| e.data)
    }

    fn set(&self, key: Arc<str>, data: Option<Data>, ttl: Option<Duration>) {
        match data {
            Some(data) => self.cache.insert(
                key,
                Entry {
                    data,
                    expires: ttl.map(|t| Instant::now() + t),
                },
            ),
            None => self.cache.invalidate(&key),
        }
    }

    /// Adds `by` to the number at `key` (0 when absent or expired): the new number, or
    /// `None` when the value there is not a number.
    fn incr(&self, key: Arc<str>, by: f64, ttl: Option<Duration>) -> Option<f64> {
        let mut result = None;
        self.cache.entry(key).and_compute_with(|old| {
            let (base, expires) = match old.map(|e| e.into_value()) {
                None => (0.0, ttl.map(|t| Instant::now() + t)),
                Some(Entry {
                    data: Data::Number(n),
                    expires,
                }) => (n, expires),
                Some(_) => return Op::Nop,
            };
            result = Some(base + by);
            Op::Put(Entry {
                data: Data::Number(base + by),
                expires,
            })
        });
        result
    }
}

/// Stores what a `get_or_load` loader returned (nothing for `nil`).
pub fn store(d: &SharedDict, k: &str, v: Value, seconds: Option<f64>) -> mlua::Result<()> {
    if let Some(v @ Some(_)) = Some(data(v)?).filter(|v| v.is_some()) {
        let k = Arc::<str>::from(k);
        if k.is_empty() || k.len() > MAX_KEY {
            return Err(mlua::Error::runtime(format!(
                "a shared key is 1 to {MAX_KEY} bytes"
            )));
        }
        d.set(k, v, ttl(seconds)?);
    }
    Ok(())
}

/// The Lua object of a dictionary (`shared`).
pub struct Shared(pub Arc<SharedDict>);

fn key(k: mlua::LuaString) -> mlua::Result<Arc<str>> {
    let k = k.to_str()?;
    if k.is_empty() || k.len() > MAX_KEY {
        return Err(mlua::Error::runtime(format!(
            "a shared key is 1 to {MAX_KEY} bytes"
        )));
    }
    Ok(Arc::from(&*k))
}

fn ttl(seconds: Option<f64>) -> mlua::Result<Option<Duration>> {
    match seconds {
        None => Ok(None),
        Some(s) if s > 0.0 && s <= 365.0 * 86400.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(mlua::Error::runtime(format!(
            "a ttl is a number of seconds above 0 (at most a year), not {s}"
        ))),
    }
}

fn data(v: Value) -> mlua::Result<Option<Data>> {
    Ok(match v {
        Value::Nil => None,
        Value::Boolean(b) => Some(Data::Bool(b)),
        Value::Integer(n) => Some(Data::Number(n as f64)),
        Value::Number(n) => Some(Data::Number(n)),
        Value::String(s) => {
            let s = s.to_str()?;
            if s.len() > MAX_VALUE {
                return Err(mlua::Error::runtime(format!(
                    "a shared value is at most {MAX_VALUE} bytes"
                )));
            }
            Some(Data::Text(Arc::from(&*s)))
        }
        other => {
            return Err(mlua::Error::runtime(format!(
                "a shared value is a string, number or boolean, not a {}",
                other.type_name()
            )))
        }
    })
}

fn lua_value(lua: &mlua::Lua, d: Option<Data>) -> mlua::Result<Value> {
    Ok(match d {
        None => Value::Nil,
        Some(Data::Bool(b)) => Value::Boolean(b),
        Some(Data::Number(n)) => Value::Number(n),
        Some(Data::Text(s)) => Value::String(lua.create_string(&*s)?),
    })
}

impl UserData for Shared {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("get", |lua, this, k: mlua::LuaString| {
            lua_value(lua, this.0.get(&k.to_str()?))
        });
        methods.add_method(
            "set",
            |_, this, (k, v, seconds): (mlua::LuaString, Value, Option<f64>)| {
                this.0.set(key(k)?, data(v)?, ttl(seconds)?);
                Ok(())
            },
        );
        methods.add_method("delete", |_, this, k: mlua::LuaString| {
            this.0.set(key(k)?, None, None);
            Ok(())
        });
        methods.add_method(
            "incr",
            |_, this, (k, by, seconds): (mlua::LuaString, Option<f64>, Option<f64>)| {
                this.0
                    .incr(key(k)?, by.unwrap_or(1.0), ttl(seconds)?)
                    .ok_or_else(|| mlua::Error::runtime("incr: the value there is not a number"))
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_ttls_counters_and_the_size_bound() {
        let d = SharedDict::new("t", 1 << 20);
        let k = |s: &str| Arc::<str>::from(s);
        d.set(k("a"), Some(Data::Text("x".into())), None);
        assert_eq!(d.get("a"), Some(Data::Text("x".into())));
        d.set(k("a"), None, None);
        assert_eq!(d.get("a"), None);
        assert_eq!(d.incr(k("n"), 2.0, None), Some(2.0));
        assert_eq!(d.incr(k("n"), 3.0, None), Some(5.0));
        d.set(k("s"), Some(Data::Bool(true)), None);
        assert_eq!(d.incr(k("s"), 1.0, None), None, "not a number: left alone");
        assert_eq!(d.get("s"), Some(Data::Bool(true)));
        d.set(
            k("t"),
            Some(Data::Number(1.0)),
            Some(Duration::from_millis(30)),
        );
        assert_eq!(d.get("t"), Some(Data::Number(1.0)));
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(d.get("t"), None, "expired");
        // Concurrent increments from many threads: none lost.
        let d = Arc::new(d);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let d = d.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        d.incr(Arc::from("c"), 1.0, None);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(d.get("c"), Some(Data::Number(4000.0)));
        // Bounded: 64 KiB of 1 KiB values keep well under 64 KiB.
        let small = SharedDict::new("small", 64 << 10);
        for i in 0..1000 {
            let v = Data::Text("v".repeat(1000).into());
            small.set(Arc::from(format!("k{i}").as_str()), Some(v), None);
        }
        small.cache.run_pending_tasks();
        assert!(
            small.cache.weighted_size() <= 64 << 10,
            "{}",
            small.cache.weighted_size()
        );
        assert!(small.cache.entry_count() < 100);
    }
}
