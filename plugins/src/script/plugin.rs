//! The `script` plugin's phases as tether calls them: each runs the script's function of
//! that name, if it has one, and turns its answer into what the proxy does next.

use super::view::Bound;
use super::vm::{Failure, Kind};
use super::{Msg, Phase, Script};
use crate::{Connection, Flow, LogSummary, Plugin, RequestState, Route};
use async_trait::async_trait;
use mlua::Value;
use pingora_http::{RequestHeader, ResponseHeader};

#[async_trait]
impl Plugin for Script {
    fn name(&self) -> &'static str {
        "script"
    }

    fn edits_messages(&self) -> bool {
        [
            Phase::Request,
            Phase::UpstreamRequest,
            Phase::UpstreamResponse,
            Phase::Response,
        ]
        .into_iter()
        .any(|p| self.defines(p))
    }

    async fn request(
        &self,
        req: &mut RequestHeader,
        conn: &Connection,
        state: &mut RequestState,
    ) -> Flow {
        if !self.defines(Phase::Request) {
            return Flow::Continue;
        }
        let mut msg = Msg::Writable(req, conn);
        let answer = self
            .run_waiting(Phase::Request, state, &mut msg, |_, value| match value {
                Value::Nil => Ok(None),
                Value::Table(t) => Self::answer(&t).map(Some),
                _ => Err(Failure {
                    kind: Kind::Error,
                    message: "request must return nothing or an answer table".into(),
                }),
            })
            .await;
        let answer = match answer {
            Ok(None) => return Flow::Continue,
            Ok(Some(a)) => Ok(a),
            Err(_) => Err(()),
        };
        match answer.ok().or_else(|| self.on_error()) {
            Some((status, headers, body)) => Flow::Respond {
                status,
                headers,
                body,
            },
            None => Flow::Continue,
        }
    }

    async fn route(
        &self,
        req: &RequestHeader,
        conn: &Connection,
        state: &mut RequestState,
    ) -> Route {
        if !self.defines(Phase::Route) {
            return Route::Continue;
        }
        let mut msg = Msg::ReadOnly(req, conn);
        let routed = self
            .run_waiting(Phase::Route, state, &mut msg, |this, value| {
                this.route_of(value)
            })
            .await;
        match routed {
            Ok(route) => route,
            Err(_) => match self.on_error() {
                Some((status, headers, body)) => Route::Respond {
                    status,
                    headers,
                    body,
                },
                None => Route::Continue,
            },
        }
    }

    async fn upstream_request(&self, req: &mut RequestHeader, state: &mut RequestState) {
        if self.defines(Phase::UpstreamRequest) {
            let bind = Bound::Request { req, conn: None };
            let _ = self.run(Phase::UpstreamRequest, state, bind, |_| Ok(Value::Nil));
        }
    }

    async fn upstream_response(&self, resp: &mut ResponseHeader, state: &mut RequestState) {
        if self.defines(Phase::UpstreamResponse) {
            let bind = Bound::Response(resp);
            let _ = self.run(Phase::UpstreamResponse, state, bind, |_| Ok(Value::Nil));
        }
    }

    async fn response(&self, resp: &mut ResponseHeader, state: &mut RequestState) {
        if self.defines(Phase::Response) {
            let bind = Bound::Response(resp);
            let _ = self.run(Phase::Response, state, bind, |_| Ok(Value::Nil));
        }
    }

    fn logging(&self, summary: &LogSummary, state: &mut RequestState) {
        if !self.defines(Phase::Log) {
            return;
        }
        let info = |lua: &mlua::Lua| {
            let t = lua.create_table()?;
            t.raw_set("status", summary.status)?;
            Ok(Value::Table(t))
        };
        let Ok(Value::Table(fields)) = self.run(Phase::Log, state, Bound::Nothing, info) else {
            return;
        };
        for (name, value) in fields.pairs::<String, Value>().flatten() {
            if let Ok(Some(text)) = value.to_string().map(Some) {
                state.add_log_field(name, text);
            }
        }
    }
}
