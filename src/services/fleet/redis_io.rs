//! Talking to the fleet's Redis: connecting, and the few commands the sync task sends.
//!
//! Every call is bounded by `command_timeout` (the client's own response timeout, and ours
//! around it). A call fails as [`Failure::Link`] when the connection is unusable (the sync
//! task then reconnects) or [`Failure::Data`] when Redis answered with an error (a key of
//! the wrong type, say): that is logged and counted, and the connection is kept.

use super::keys::Keys;
use crate::config::shared_state::SharedState;
use redis::aio::MultiplexedConnection;
use redis::streams::StreamReadReply;
use redis::{AsyncConnectionConfig, Client, IntoConnectionInfo, RedisError, Value};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("{0}")]
    Link(String),
    #[error("{0}")]
    Data(String),
}

impl From<RedisError> for Failure {
    fn from(e: RedisError) -> Failure {
        let link = e.is_io_error()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_unrecoverable_error();
        if link {
            Failure::Link(e.to_string())
        } else {
            Failure::Data(e.to_string())
        }
    }
}

/// Compare-and-set of hash fields by version, and the change event for each accepted one,
/// in one atomic step. KEYS: the hash, the event stream. ARGV: kind, cluster, now (ms),
/// stream length, origin, then field/value pairs; a value starts with `<version>|`.
/// Returns, per pair, "" when it was accepted, else the newer value Redis keeps.
const CAS: &str = r#"
local out = {}
for i = 6, #ARGV, 2 do
  local f, v = ARGV[i], ARGV[i + 1]
  local nv = tonumber(string.match(v, '^(%d+)|')) or 0
  local cur = redis.call('HGET', KEYS[1], f)
  local cv = cur and tonumber(string.match(cur, '^(%d+)|'))
  if cv and cv >= nv then
    out[#out + 1] = cur
  else
    redis.call('HSET', KEYS[1], f, v)
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*',
      'k', ARGV[1], 'c', ARGV[2], 'f', f, 'v', v, 't', ARGV[3], 'o', ARGV[5])
    out[#out + 1] = ''
  end
end
return out
"#;

/// Events kept in the stream: an instance that falls further behind loads everything again.
/// 500,000 events are 7 s of a fleet learning 4M partitions a minute, and a few tens of MB
/// in Redis; 100,000 (1.5 s at that rate) let a busy instance fall behind, reload, and
/// fall behind again (`bench/README.md`, "Fleet").
pub const STREAM_LEN: usize = 500_000;
/// How long one stream read waits for news.
pub const BLOCK: Duration = Duration::from_millis(1000);
/// Field/value pairs per script call.
pub const BATCH: usize = 500;

/// A hash's fields and values, as read.
pub type Fields = Vec<(Vec<u8>, Vec<u8>)>;

pub struct Redis {
    con: MultiplexedConnection,
    timeout: Duration,
    cas: redis::Script,
}

/// One stream entry, its fields as text (garbage fields are empty).
pub struct Event {
    pub id: String,
    pub kind: String,
    pub cluster: String,
    pub field: String,
    pub value: Vec<u8>,
    pub at_ms: u64,
    /// The writing process's origin token; empty from tether versions before it.
    pub origin: String,
}

/// The client for the master a sentinel names now.
async fn sentinel_client(
    s: &SharedState,
    sentinel: &crate::config::shared_state::Sentinel,
) -> Result<Client, Failure> {
    use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
    let mut node = redis::RedisConnectionInfo::default();
    if let Some(p) = &s.password {
        node = node.set_password(p);
    }
    if let Some(u) = &s.username {
        node = node.set_username(u);
    }
    let mut client = SentinelClient::build(
        sentinel.addresses.clone(),
        sentinel.master.clone(),
        Some(SentinelNodeConnectionInfo::default().set_redis_connection_info(node)),
        SentinelServerType::Master,
    )
    .map_err(|e| Failure::Link(e.to_string()))?;
    match tokio::time::timeout(s.connect_timeout, client.async_get_client()).await {
        Ok(r) => r.map_err(|e| Failure::Link(format!("sentinel: {e}"))),
        Err(_) => Err(Failure::Link(format!(
            "no sentinel named master {} within {:?}",
            sentinel.master, s.connect_timeout
        ))),
    }
}

/// Makes ring the process's rustls crypto provider, once. The Redis client builds its rustls
/// config with `ClientConfig::builder()`, which panics when no provider was installed and
/// rustls cannot pick one from its features (redis turns rustls's default `aws-lc-rs` off):
/// the first `rediss://` connect then killed tether (`load_at_start` runs it on the main
/// thread). Installing one ourselves, rather than relying on "exactly one provider feature
/// on", also keeps working if another dependency ever turns `aws-lc-rs` on too.
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err: a provider is installed already; that one serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

async fn client(s: &SharedState) -> Result<Client, Failure> {
    install_crypto_provider();
    if let Some(sentinel) = &s.sentinel {
        return sentinel_client(s, sentinel).await;
    }
    let info = s
        .url
        .as_str()
        .into_connection_info()
        .map_err(|e| Failure::Link(e.to_string()))?;
    let mut redis = info.redis_settings().clone();
    if let Some(p) = &s.password {
        redis = redis.set_password(p);
    }
    if let Some(u) = &s.username {
        redis = redis.set_username(u);
    }
    let info = info.set_redis_settings(redis);
    let client = match &s.ca_pem {
        Some(pem) => Client::build_with_tls(
            info,
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.clone()),
            },
        ),
        None => Client::open(info),
    };
    client.map_err(|e| Failure::Link(e.to_string()))
}

/// Opens a connection whose replies may take `wait` longer than a command's timeout.
async fn open(s: &SharedState, wait: Duration) -> Result<MultiplexedConnection, Failure> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(s.connect_timeout))
        .set_response_timeout(Some(s.command_timeout + wait));
    let client = client(s).await?;
    let connect = client.get_multiplexed_async_connection_with_config(&config);
    match tokio::time::timeout(s.connect_timeout + s.command_timeout, connect).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(Failure::Link(format!(
            "no connection within {:?}",
            s.connect_timeout
        ))),
    }
}

impl Redis {
    /// A connection for commands.
    pub async fn connect(s: &SharedState) -> Result<Redis, Failure> {
        let con = open(s, Duration::ZERO).await?;
        let mut r = Redis {
            con,
            timeout: s.command_timeout,
            cas: redis::Script::new(CAS),
        };
        r.ping().await?;
        Ok(r)
    }

    /// A connection for blocking stream reads.
    pub async fn connect_reader(s: &SharedState) -> Result<Redis, Failure> {
        Ok(Redis {
            con: open(s, BLOCK).await?,
            timeout: s.command_timeout + BLOCK,
            cas: redis::Script::new(CAS),
        })
    }

    pub(super) async fn run<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(self.timeout, cmd.query_async::<T>(&mut self.con)).await {
            Ok(r) => Ok(r?),
            Err(_) => Err(Failure::Link(format!(
                "no answer within {:?}",
                self.timeout
            ))),
        }
    }

    /// Merges `dense` (a HyperLogLog in Redis's dense form) into `key` through `tmp`, and
    /// makes `key` expire in `ttl_s`.
    pub async fn merge_hll(
        &mut self,
        key: &str,
        tmp: &str,
        dense: &[u8],
        ttl_s: u64,
    ) -> Result<(), Failure> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("SET")
            .arg(tmp)
            .arg(dense)
            .arg("PX")
            .arg(60_000)
            .ignore()
            .cmd("PFMERGE")
            .arg(key)
            .arg(tmp)
            .ignore()
            .cmd("DEL")
            .arg(tmp)
            .ignore()
            .cmd("EXPIRE")
            .arg(key)
            .arg(ttl_s)
            .ignore();
        self.run_pipe(&pipe).await
    }

    pub(super) async fn run_pipe<T: redis::FromRedisValue>(
        &mut self,
        pipe: &redis::Pipeline,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(self.timeout, pipe.query_async::<T>(&mut self.con)).await {
            Ok(r) => Ok(r?),
            Err(_) => Err(Failure::Link(format!(
                "no answer within {:?}",
                self.timeout
            ))),
        }
    }

    /// The union's cardinality of the HyperLogLogs at `keys` (absent ones count as empty).
    pub async fn count_hll(&mut self, keys: &[String]) -> Result<u64, Failure> {
        let mut cmd = redis::cmd("PFCOUNT");
        for k in keys {
            cmd.arg(k);
        }
        self.run(&cmd).await
    }

    pub async fn ping(&mut self) -> Result<(), Failure> {
        self.run::<String>(&redis::cmd("PING")).await.map(drop)
    }

    /// The fleet's epoch token; set to `fresh` first when Redis has none (it was empty).
    /// Returns the token and whether it was just set.
    pub async fn epoch(&mut self, keys: &Keys, fresh: &str) -> Result<(String, bool), Failure> {
        let mut set = redis::cmd("SET");
        set.arg(keys.epoch()).arg(fresh).arg("NX");
        let was_set: Option<String> = self.run(&set).await?;
        if was_set.is_some() {
            return Ok((fresh.to_string(), true));
        }
        let mut get = redis::cmd("GET");
        get.arg(keys.epoch());
        match self.run::<Option<String>>(&get).await {
            Ok(token) => Ok((token.unwrap_or_default(), false)),
            // Not a string (garbage): there is no token to compare, and no reason to stop.
            Err(Failure::Data(_)) => Ok(("?".into(), false)),
            Err(e) => Err(e),
        }
    }

    /// Compare-and-set of `pairs` in `hash`; per pair, `None` when accepted, else the value
    /// Redis keeps instead.
    pub async fn publish(
        &mut self,
        keys: &Keys,
        (hash, kind, cluster): (&str, &str, &str),
        (now_ms, origin): (u64, &str),
        pairs: &[(String, String)],
    ) -> Result<Vec<Option<Vec<u8>>>, Failure> {
        let mut out = Vec::with_capacity(pairs.len());
        for chunk in pairs.chunks(BATCH) {
            let mut call = self.cas.key(hash);
            call.key(keys.events())
                .arg(kind)
                .arg(cluster)
                .arg(now_ms)
                .arg(STREAM_LEN)
                .arg(origin);
            for (f, v) in chunk {
                call.arg(f).arg(v);
            }
            let fut = call.invoke_async::<Vec<Vec<u8>>>(&mut self.con);
            let answers = match tokio::time::timeout(self.timeout, fut).await {
                Ok(r) => r?,
                Err(_) => {
                    return Err(Failure::Link(format!(
                        "no answer within {:?}",
                        self.timeout
                    )))
                }
            };
            out.extend(answers.into_iter().map(|a| (!a.is_empty()).then_some(a)));
        }
        Ok(out)
    }

    /// Appends an event that changes no hash (a health hint).
    pub async fn event(
        &mut self,
        keys: &Keys,
        (kind, cluster, field, value): (&str, &str, &str, &str),
        (now_ms, origin): (u64, &str),
    ) -> Result<(), Failure> {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(keys.events())
            .arg("MAXLEN")
            .arg("~")
            .arg(STREAM_LEN)
            .arg("*")
            .arg(&[("k", kind), ("c", cluster), ("f", field), ("v", value)])
            .arg("t")
            .arg(now_ms)
            .arg("o")
            .arg(origin);
        self.run::<Value>(&cmd).await.map(drop)
    }

    /// Every field and value of `hash`, read in steps (HSCAN) so Redis is never blocked.
    pub async fn hash(&mut self, hash: &str) -> Result<Fields, Failure> {
        let mut out = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let mut cmd = redis::cmd("HSCAN");
            cmd.arg(hash).arg(cursor).arg("COUNT").arg(1000);
            let (next, flat): (u64, Vec<Vec<u8>>) = self.run(&cmd).await?;
            let mut it = flat.into_iter();
            while let (Some(f), Some(v)) = (it.next(), it.next()) {
                out.push((f, v));
            }
            if next == 0 {
                return Ok(out);
            }
            cursor = next;
        }
    }

    pub async fn set_field(&mut self, hash: &str, field: &str, value: &str) -> Result<(), Failure> {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(hash).arg(field).arg(value);
        self.run::<Value>(&cmd).await.map(drop)
    }

    /// Removes `fields` from `hash`.
    pub async fn del_fields(&mut self, hash: &str, fields: &[Vec<u8>]) -> Result<(), Failure> {
        if fields.is_empty() {
            return Ok(());
        }
        let mut cmd = redis::cmd("HDEL");
        cmd.arg(hash).arg(fields);
        self.run::<Value>(&cmd).await.map(drop)
    }

    /// The id of the stream's last entry ("0-0" when it has none).
    pub async fn last_id(&mut self, keys: &Keys) -> Result<String, Failure> {
        self.edge_id(keys, "XREVRANGE", "+", "-").await
    }

    /// The id of the stream's first entry ("0-0" when it has none).
    pub async fn first_id(&mut self, keys: &Keys) -> Result<String, Failure> {
        self.edge_id(keys, "XRANGE", "-", "+").await
    }

    async fn edge_id(
        &mut self,
        keys: &Keys,
        cmd: &str,
        from: &str,
        to: &str,
    ) -> Result<String, Failure> {
        let mut c = redis::cmd(cmd);
        c.arg(keys.events()).arg(from).arg(to).arg("COUNT").arg(1);
        let entries: Vec<(String, Value)> = self.run(&c).await?;
        Ok(entries
            .into_iter()
            .next()
            .map_or_else(|| "0-0".to_string(), |(id, _)| id))
    }

    /// Events after `after`, waiting up to [`BLOCK`] for the first; at most `count`.
    pub async fn read(
        &mut self,
        keys: &Keys,
        after: &str,
        count: usize,
    ) -> Result<Vec<Event>, Failure> {
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT")
            .arg(count)
            .arg("BLOCK")
            .arg(BLOCK.as_millis() as u64)
            .arg("STREAMS")
            .arg(keys.events())
            .arg(after);
        let reply: Option<StreamReadReply> = self.run(&cmd).await?;
        let text = |m: &std::collections::HashMap<String, Value>, k: &str| match m.get(k) {
            Some(Value::BulkString(b)) => b.clone(),
            Some(Value::SimpleString(s)) => s.clone().into_bytes(),
            _ => Vec::new(),
        };
        let mut out = Vec::new();
        for key in reply.map(|r| r.keys).unwrap_or_default() {
            for id in key.ids {
                let s = |k| String::from_utf8_lossy(&text(&id.map, k)).into_owned();
                out.push(Event {
                    kind: s("k"),
                    cluster: s("c"),
                    field: s("f"),
                    value: text(&id.map, "v"),
                    at_ms: s("t").parse().unwrap_or(0),
                    origin: s("o"),
                    id: id.id,
                });
            }
        }
        Ok(out)
    }
}

/// Redis errors that leave the connection usable, logged at most every 10 s.
static DATA_ERRORS: crate::base::every::Every = crate::base::every::Every::new(10_000);

/// `r`, with an error that leaves the connection usable logged and turned into `None`.
pub fn data_ok<T>(r: Result<T, Failure>, what: &str) -> Result<Option<T>, Failure> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(Failure::Data(e)) => {
            data_error(what, &e);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A Redis error that leaves the connection usable is logged and skipped.
pub fn data_error(what: &str, e: &str) {
    if let Some(n) = DATA_ERRORS.due(crate::routing::now_ms()) {
        log::error!("fleet: Redis refused {what}: {e} ({n} such errors in the last 10 s)");
    }
}
