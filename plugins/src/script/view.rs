//! What a script sees of a request or a response: two objects made once per VM (`r` for
//! the request, `resp` for a response) whose fields and methods read and change the
//! message of the phase being run. A phase call binds them to its message for the call's
//! length ([`Current::bind`]); outside a call, or for the other kind of message, they
//! answer with an error rather than anything stale.

use crate::key::cookie;
use crate::Connection;
use mlua::{Lua, UserData, UserDataFields, UserDataMethods};
use pingora_http::{RequestHeader, ResponseHeader};
use std::cell::Cell;
use std::ptr::NonNull;
use std::rc::Rc;

/// The message of the phase being run.
pub enum Bound<'a> {
    /// The request (the client's, or the one sent to the server), which the script may
    /// change.
    Request {
        req: &'a mut RequestHeader,
        conn: Option<&'a Connection>,
    },
    /// The request, read only (the route phase).
    ReadOnly {
        req: &'a RequestHeader,
        conn: Option<&'a Connection>,
    },
    Response(&'a mut ResponseHeader),
    /// No message (the log phase).
    Nothing,
}

/// Pointers to the bound message, set only while a phase call runs on this VM's thread
/// (the VM is the thread's own; a call does not yield).
#[derive(Default)]
pub struct Current {
    req: Cell<Option<NonNull<RequestHeader>>>,
    writable: Cell<bool>,
    conn: Cell<Option<NonNull<Connection>>>,
    resp: Cell<Option<NonNull<ResponseHeader>>>,
}

/// Clears the bound message when the call ends, however it ends.
pub struct Binding(Rc<Current>);

impl Drop for Binding {
    fn drop(&mut self) {
        self.0.req.set(None);
        self.0.conn.set(None);
        self.0.resp.set(None);
        self.0.writable.set(false);
    }
}

impl Current {
    /// Points the objects at `bound` until the returned binding is dropped. The borrows in
    /// `bound` outlive the binding (it is dropped inside the call that received them).
    pub fn bind(self: &Rc<Self>, bound: Bound<'_>) -> Binding {
        match bound {
            Bound::Request { req, conn } => {
                self.req.set(Some(NonNull::from(req)));
                self.conn.set(conn.map(NonNull::from));
                self.writable.set(true);
            }
            // Never written through: `writable` stays false.
            Bound::ReadOnly { req, conn } => {
                self.req.set(Some(NonNull::from(req)));
                self.conn.set(conn.map(NonNull::from));
            }
            Bound::Response(resp) => self.resp.set(Some(NonNull::from(resp))),
            Bound::Nothing => {}
        }
        Binding(self.clone())
    }
}

fn current(lua: &Lua) -> mlua::Result<Rc<Current>> {
    lua.app_data_ref::<Rc<Current>>()
        .map(|c| c.clone())
        .ok_or_else(|| mlua::Error::runtime("no message in this phase"))
}

fn with_request<R>(
    lua: &Lua,
    f: impl FnOnce(&RequestHeader, Option<&Connection>) -> mlua::Result<R>,
) -> mlua::Result<R> {
    let c = current(lua)?;
    let Some(req) = c.req.get() else {
        return Err(mlua::Error::runtime(
            "the request is not available in this phase",
        ));
    };
    // SAFETY: set by `bind` from a borrow that outlives the call running now, on this thread;
    // nothing else uses the request while the script runs.
    let req = unsafe { req.as_ref() };
    let conn = c.conn.get().map(|p| unsafe { &*p.as_ptr() });
    f(req, conn)
}

fn with_request_mut<R>(
    lua: &Lua,
    f: impl FnOnce(&mut RequestHeader) -> mlua::Result<R>,
) -> mlua::Result<R> {
    let c = current(lua)?;
    let Some(mut req) = c.req.get() else {
        return Err(mlua::Error::runtime(
            "the request is not available in this phase",
        ));
    };
    if !c.writable.get() {
        return Err(mlua::Error::runtime(
            "the request cannot be changed in this phase (only in request and upstream_request)",
        ));
    }
    // SAFETY: as in `with_request`; the borrow was a mutable one and no other reference to
    // the request lives during this method.
    f(unsafe { req.as_mut() })
}

fn with_response<R>(
    lua: &Lua,
    f: impl FnOnce(&mut ResponseHeader) -> mlua::Result<R>,
) -> mlua::Result<R> {
    let c = current(lua)?;
    let Some(mut resp) = c.resp.get() else {
        return Err(mlua::Error::runtime(
            "the response is not available in this phase",
        ));
    };
    // SAFETY: as in `with_request_mut`.
    f(unsafe { resp.as_mut() })
}

fn bad(e: impl std::fmt::Display) -> mlua::Error {
    mlua::Error::runtime(e.to_string())
}

/// The request object (`r`).
struct RequestObject;

/// The response object (`resp`).
struct ResponseObject;

impl UserData for RequestObject {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        fields.add_field_method_get("method", |lua, _| {
            with_request(lua, |r, _| Ok(r.method.as_str().to_string()))
        });
        fields.add_field_method_get("path", |lua, _| {
            with_request(lua, |r, _| Ok(r.uri.path().to_string()))
        });
        fields.add_field_method_get("query", |lua, _| {
            with_request(lua, |r, _| Ok(r.uri.query().map(str::to_string)))
        });
        fields.add_field_method_get("client", |lua, _| {
            with_request(lua, |_, c| {
                Ok(c.and_then(|c| c.client).map(|ip| ip.to_string()))
            })
        });
        fields.add_field_method_get("listener", |lua, _| {
            with_request(lua, |_, c| {
                Ok(c.and_then(|c| c.listener.as_deref().map(str::to_string)))
            })
        });
        fields.add_field_method_get("route", |lua, _| {
            with_request(lua, |_, c| {
                Ok(c.and_then(|c| c.route.as_deref().map(str::to_string)))
            })
        });
        fields.add_field_method_get("tls", |lua, _| {
            with_request(lua, |_, c| {
                let Some(tls) = c.and_then(|c| c.tls.as_deref()) else {
                    return Ok(None);
                };
                let t = lua.create_table()?;
                t.set("version", &*tls.version)?;
                t.set("sni", tls.sni.as_deref())?;
                t.set("client_subject", tls.client_subject.as_deref())?;
                Ok(Some(t))
            })
        });
    }

    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("header", |lua, _, name: String| {
            with_request(lua, |r, _| {
                Ok(r.headers
                    .get(name.as_str())
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()))
            })
        });
        methods.add_method("cookie", |lua, _, name: String| {
            with_request(lua, |r, _| Ok(cookie(r, &name).map(str::to_string)))
        });
        methods.add_method("session", |lua, _, cluster: Option<String>| {
            with_request(lua, |r, c| session(lua, r, c, cluster.as_deref()))
        });
        methods.add_method("set_header", |lua, _, (name, value): (String, String)| {
            with_request_mut(lua, |r| {
                r.insert_header(name, value).map(|_| ()).map_err(bad)
            })
        });
        methods.add_method("add_header", |lua, _, (name, value): (String, String)| {
            with_request_mut(lua, |r| {
                r.append_header(name, value).map(|_| ()).map_err(bad)
            })
        });
        methods.add_method("remove_header", |lua, _, name: String| {
            with_request_mut(lua, |r| {
                r.remove_header(&name);
                Ok(())
            })
        });
        methods.add_method("set_path", |lua, _, path: String| {
            with_request_mut(lua, |r| {
                let query = r.uri.query().map(str::to_string);
                set_target(r, &path, query.as_deref())
            })
        });
        methods.add_method("set_query", |lua, _, query: Option<String>| {
            with_request_mut(lua, |r| {
                let path = r.uri.path().to_string();
                set_target(r, &path, query.as_deref())
            })
        });
    }
}

/// `r:session([cluster])`: tether's view of the request's session in `cluster` (by default
/// the one the request is headed for), as a table; `nil` without one. An unknown cluster
/// is an error.
fn session(
    lua: &Lua,
    r: &RequestHeader,
    c: Option<&Connection>,
    cluster: Option<&str>,
) -> mlua::Result<Option<mlua::Table>> {
    let Some((lens, c)) = c.and_then(|c| Some((c.sessions.as_deref()?, c))) else {
        return Ok(None);
    };
    let index = match cluster {
        Some(name) => Some(lens.cluster(name).ok_or_else(|| {
            mlua::Error::runtime(format!("r:session: no cluster `{name}` in the config"))
        })?),
        None => c.cluster,
    };
    let Some(view) = index.and_then(|i| lens.session(r, i)) else {
        return Ok(None);
    };
    let t = lua.create_table()?;
    t.set("cluster", view.cluster)?;
    t.set("id", view.id)?;
    t.set("token", view.token)?;
    t.set("server", view.server)?;
    t.set("why", view.why)?;
    Ok(Some(t))
}

/// Sets the request's target to `path` and `query`; refused unless it is a valid
/// origin-form target.
fn set_target(r: &mut RequestHeader, path: &str, query: Option<&str>) -> mlua::Result<()> {
    if !path.starts_with('/') {
        return Err(mlua::Error::runtime(format!(
            "a path must start with `/`: `{path}`"
        )));
    }
    let target = match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let uri: http::Uri = target
        .parse()
        .map_err(|e| mlua::Error::runtime(format!("not a valid target `{target}`: {e}")))?;
    r.set_uri(uri);
    Ok(())
}

impl UserData for ResponseObject {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        fields.add_field_method_get("status", |lua, _| {
            with_response(lua, |r| Ok(r.status.as_u16()))
        });
    }

    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("header", |lua, _, name: String| {
            with_response(lua, |r| {
                Ok(r.headers
                    .get(name.as_str())
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()))
            })
        });
        methods.add_method("set_header", |lua, _, (name, value): (String, String)| {
            with_response(lua, |r| {
                r.insert_header(name, value).map(|_| ()).map_err(bad)
            })
        });
        methods.add_method("add_header", |lua, _, (name, value): (String, String)| {
            with_response(lua, |r| {
                r.append_header(name, value).map(|_| ()).map_err(bad)
            })
        });
        methods.add_method("remove_header", |lua, _, name: String| {
            with_response(lua, |r| {
                r.remove_header(&name);
                Ok(())
            })
        });
        methods.add_method("set_status", |lua, _, status: u16| {
            with_response(lua, |r| r.set_status(status).map_err(bad))
        });
    }
}

/// The VM's two objects, and its [`Current`] in the VM's app data.
pub fn objects(lua: &Lua) -> mlua::Result<(mlua::AnyUserData, mlua::AnyUserData)> {
    lua.set_app_data(Rc::new(Current::default()));
    Ok((
        lua.create_userdata(RequestObject)?,
        lua.create_userdata(ResponseObject)?,
    ))
}
