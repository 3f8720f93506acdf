//! What a script may wait for without blocking its thread, in the `request` and `route`
//! phases: HTTP calls to the destinations its entry allows (`http.get`, `http.post`, on
//! Pingora's pooled keep-alive connector, each bounded by a timeout) and the shared
//! dictionary's `get_or_load` (one load for concurrent requests of a key, the others wait
//! for it). Each starts here as a future kept by the VM under an id; the script's Lua side
//! (the prelude) yields that id; the phase, which runs the script as a coroutine, awaits
//! the future and resumes the coroutine with its result. Also `json.encode`/`json.decode`.

use super::shared::{Shared, SharedDict};
use mlua::{Lua, LuaSerdeExt, MultiValue, Table, Value};
use pingora_core::connectors::http::Connector;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_http::RequestHeader;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// The largest answer body an HTTP call reads.
pub const MAX_BODY: usize = 1 << 20;
/// Idle connections to an allowed destination are kept this long.
const IDLE: Duration = Duration::from_secs(60);

/// Where a script's HTTP calls may go, and how long each may take.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    /// `host:port` as written (a URL's authority must be one of them), and its address.
    pub allow: Vec<(String, SocketAddr)>,
    pub timeout: Duration,
}

/// What a wait ended with, given back to the script when it resumes.
pub enum Outcome {
    Http(Result<HttpAnswer, String>),
    /// A `get_or_load` wait ended (its key loaded, or the wait timed out).
    Loaded,
}

pub struct HttpAnswer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

pub type Wait = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// The VM's side of waits: the futures started by the call running now, by id.
#[derive(Default)]
pub struct Waits {
    next: Cell<u64>,
    started: RefCell<HashMap<u64, Wait>>,
    /// True while a phase that may wait runs (`request`, `route`).
    open: Cell<bool>,
}

impl Waits {
    fn start(&self, wait: Wait) -> mlua::Result<u64> {
        if !self.open.get() {
            return Err(mlua::Error::runtime(
                "waiting (http, get_or_load) is only possible in the request and route phases",
            ));
        }
        let id = self.next.get() + 1;
        self.next.set(id);
        self.started.borrow_mut().insert(id, wait);
        Ok(id)
    }

    pub fn take(&self, id: u64) -> Option<Wait> {
        self.started.borrow_mut().remove(&id)
    }

    pub fn set_open(&self, open: bool) {
        self.open.set(open);
        if !open {
            self.started.borrow_mut().clear();
        }
    }
}

/// The Lua side: `http`, `json`, `shared` with `get_or_load`, as globals.
const PRELUDE: &str = r#"
local start_http, claim, finish, dict = ...
local yield = coroutine.yield
local function await(id) return yield("tether:wait", id) end
http = {
  get = function(url, opts) return await(start_http("GET", url, nil, opts)) end,
  post = function(url, body, opts) return await(start_http("POST", url, body, opts)) end,
}
if dict then
  local d = dict
  shared = {
    get = function(_, k) return d:get(k) end,
    set = function(_, k, v, ttl) return d:set(k, v, ttl) end,
    delete = function(_, k) return d:delete(k) end,
    incr = function(_, k, by, ttl) return d:incr(k, by, ttl) end,
    get_or_load = function(_, k, loader, ttl)
      local v = d:get(k)
      if v ~= nil then return v end
      local leader, id = claim(k)
      if not leader then
        await(id)
        return d:get(k)
      end
      local ok, loaded = pcall(loader, k)
      finish(k, ok and loaded or nil, ttl)
      if not ok then error(loaded, 0) end
      return loaded
    end,
  }
end
"#;

/// Installs the globals (before the VM is sandboxed).
pub fn install(
    lua: &Lua,
    http: Option<&HttpSettings>,
    dict: Option<Arc<SharedDict>>,
) -> mlua::Result<Rc<Waits>> {
    let waits = Rc::new(Waits::default());
    let client = http.map(|h| Arc::new(Client::new(h.clone())));
    let w = waits.clone();
    let start_http = lua.create_function(
        move |_,
              (method, url, body, opts): (
            String,
            String,
            Option<mlua::LuaString>,
            Option<Table>,
        )| {
            let Some(client) = &client else {
                return Err(mlua::Error::runtime(
                    "http: this script's entry allows no destinations (`http: { allow: [...] }`)",
                ));
            };
            let call = client.prepare(&method, &url, body.map(|b| b.as_bytes().to_vec()), opts)?;
            let client = client.clone();
            w.start(Box::pin(
                async move { Outcome::Http(client.call(call).await) },
            ))
        },
    )?;
    let (claim, finish) = match &dict {
        Some(d) => {
            let (d1, d2, w) = (d.clone(), d.clone(), waits.clone());
            let timeout = http.map_or(Duration::from_secs(5), |h| h.timeout * 2);
            let claim =
                lua.create_function(move |_, key: String| match d1.claim(&key, timeout) {
                    None => Ok((true, None)),
                    Some(done) => {
                        let id = w.start(Box::pin(async move {
                            let _ = tokio::time::timeout(timeout, done).await;
                            Outcome::Loaded
                        }))?;
                        Ok((false, Some(id)))
                    }
                })?;
            let finish =
                lua.create_function(move |_, (key, value, ttl): (String, Value, Option<f64>)| {
                    let stored = super::shared::store(&d2, &key, value, ttl);
                    d2.finish(&key);
                    stored
                })?;
            (Value::Function(claim), Value::Function(finish))
        }
        None => (Value::Nil, Value::Nil),
    };
    let dict = match dict {
        Some(d) => Value::UserData(lua.create_userdata(Shared(d))?),
        None => Value::Nil,
    };
    lua.load(PRELUDE)
        .set_name("=tether")
        .call::<()>((start_http, claim, finish, dict))?;
    let json = lua.create_table()?;
    json.set(
        "encode",
        lua.create_function(|lua, v: Value| {
            let value: serde_json::Value = lua.from_value(v)?;
            serde_json::to_string(&value).map_err(mlua::Error::external)
        })?,
    )?;
    json.set(
        "decode",
        lua.create_function(|lua, text: mlua::LuaString| {
            let value: serde_json::Value = serde_json::from_slice(&text.as_bytes())
                .map_err(|e| mlua::Error::runtime(format!("json.decode: {e}")))?;
            lua.to_value(&value)
        })?,
    )?;
    lua.globals().set("json", json)?;
    Ok(waits)
}

/// The values a script resumes with: an HTTP answer `{ status, body, headers }` (or `nil`
/// and the error), or nothing.
pub fn resume_values(lua: &Lua, outcome: Outcome) -> mlua::Result<MultiValue> {
    match outcome {
        Outcome::Loaded => Ok(MultiValue::new()),
        Outcome::Http(Err(e)) => Ok(MultiValue::from_vec(vec![
            Value::Nil,
            Value::String(lua.create_string(&e)?),
        ])),
        Outcome::Http(Ok(a)) => {
            let t = lua.create_table()?;
            t.set("status", a.status)?;
            t.set("body", lua.create_string(&a.body)?)?;
            let headers = lua.create_table()?;
            for (n, v) in a.headers {
                headers.set(n, v)?;
            }
            t.set("headers", headers)?;
            Ok(MultiValue::from_vec(vec![Value::Table(t)]))
        }
    }
}

/// A prepared call: checked against the allowed destinations.
struct Call {
    peer: HttpPeer,
    req: RequestHeader,
    body: Option<Vec<u8>>,
    timeout: Duration,
}

struct Client {
    settings: HttpSettings,
    connector: Connector,
}

impl Client {
    fn new(settings: HttpSettings) -> Client {
        Client {
            settings,
            connector: Connector::new(None),
        }
    }

    fn prepare(
        &self,
        method: &str,
        url: &str,
        body: Option<Vec<u8>>,
        opts: Option<Table>,
    ) -> mlua::Result<Call> {
        let bad = |m: String| mlua::Error::runtime(format!("http: {m}"));
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad(format!("`{url}` is not an http:// URL")))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let with_port = match authority.rsplit_once(':') {
            Some((_, p)) if p.parse::<u16>().is_ok() => authority.to_string(),
            _ => format!("{authority}:80"),
        };
        let Some((_, addr)) = self
            .settings
            .allow
            .iter()
            .find(|(a, _)| a.eq_ignore_ascii_case(&with_port))
        else {
            return Err(bad(format!(
                "`{authority}` is not among the destinations this script's entry allows"
            )));
        };
        let mut req = RequestHeader::build(method, path.as_bytes(), None)
            .map_err(|e| bad(format!("`{url}`: {e}")))?;
        req.insert_header("Host", authority)
            .map_err(|e| bad(e.to_string()))?;
        let mut timeout = self.settings.timeout;
        if let Some(opts) = opts {
            if let Some(headers) = opts.get::<Option<Table>>("headers")? {
                for pair in headers.pairs::<String, String>() {
                    let (n, v) = pair?;
                    req.insert_header(n, v).map_err(|e| bad(e.to_string()))?;
                }
            }
            if let Some(t) = opts.get::<Option<f64>>("timeout")? {
                if t > 0.0 {
                    timeout = timeout.min(Duration::from_secs_f64(t));
                }
            }
        }
        if let Some(b) = &body {
            req.insert_header("Content-Length", b.len())
                .map_err(|e| bad(e.to_string()))?;
        }
        let mut peer = HttpPeer::new(*addr, false, String::new());
        peer.options.connection_timeout = Some(timeout);
        peer.options.read_timeout = Some(timeout);
        peer.options.idle_timeout = Some(IDLE);
        Ok(Call {
            peer,
            req,
            body,
            timeout,
        })
    }

    async fn call(&self, call: Call) -> Result<HttpAnswer, String> {
        let timeout = call.timeout;
        match tokio::time::timeout(timeout, self.exchange(call)).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
        }
    }

    async fn exchange(&self, call: Call) -> Result<HttpAnswer, String> {
        let io = |e: Box<pingora_error::Error>| e.to_string();
        let (mut session, _) = self
            .connector
            .get_http_session(&call.peer)
            .await
            .map_err(io)?;
        session
            .write_request_header(Box::new(call.req))
            .await
            .map_err(io)?;
        if let Some(body) = call.body {
            session
                .write_request_body(body.into(), true)
                .await
                .map_err(io)?;
        }
        session.finish_request_body().await.map_err(io)?;
        session.read_response_header().await.map_err(io)?;
        let resp = session.response_header().expect("just read").clone();
        let mut body = Vec::new();
        while let Some(chunk) = session.read_response_body().await.map_err(io)? {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(format!("the answer's body is over {MAX_BODY} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        self.connector
            .release_http_session(session, &call.peer, Some(IDLE))
            .await;
        let headers = resp
            .headers
            .iter()
            .map(|(n, v)| {
                let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
                (n.as_str().to_string(), v)
            })
            .collect();
        Ok(HttpAnswer {
            status: resp.status.as_u16(),
            headers,
            body,
        })
    }
}
