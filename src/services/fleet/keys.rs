//! The Redis keys a fleet shares and the text format of their values.
//!
//! Every key starts with `{<prefix>}:`; the braces are a Redis Cluster hash tag, so all of a
//! fleet's keys live in one slot and one script can change several of them atomically.
//!
//! | key | type | field | value |
//! | --- | --- | --- | --- |
//! | `{p}:partitions:<cluster>` | hash | partition key, 16 hex digits | `<version>\|<clone id>\|<instance>` |
//! | `{p}:servers` | hash | `<cluster>/<server>` | `<version>\|<state or file>\|<weight>\|<instance>` |
//! | `{p}:events` | stream | `k` kind (`p`, `s`, `down`), `c` cluster, `f` field, `v` value, `t` ms, `o` origin | |
//! | `{p}:instances` | hash | instance | `<ms>\|<partitions held>\|<pid>\|<origin>` |
//! | `{p}:epoch` | string | | random token; gone or changed: Redis lost its data |
//! | `{p}:sessions:<cluster>:<server>:<minute>` | HyperLogLog | | sessions served in that wall minute |
//! | `{p}:seen:<cluster>:<server>:<holder>` | string | | a session table's Bloom filter of the sessions live there (`drain_rescue`) |
//! | `{p}:seen:<cluster>:<server>` | set | | the holders of such filters |
//! | `{p}:watching` | string | | ms since the Unix epoch when this Redis began to hold the filters |
//!
//! The origin is a token unique to the process that wrote an event or heartbeat
//! (`identity.rs`): instances that share a name still tell their entries apart. Events and
//! heartbeats of tether versions before it have none.
//!
//! A version is a hybrid logical clock in milliseconds since the Unix epoch: the larger
//! wins. Parsing never panics: anything else under these keys is garbage, counted and
//! ignored.

use crate::config::ServerState;

#[derive(Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(prefix: &str) -> Keys {
        Keys {
            prefix: format!("{{{prefix}}}:"),
        }
    }

    pub fn partitions(&self, cluster: &str) -> String {
        format!("{}partitions:{cluster}", self.prefix)
    }

    pub fn servers(&self) -> String {
        format!("{}servers", self.prefix)
    }

    pub fn events(&self) -> String {
        format!("{}events", self.prefix)
    }

    pub fn instances(&self) -> String {
        format!("{}instances", self.prefix)
    }

    /// The fleet's HyperLogLog of the sessions `cluster/server` served in wall `minute`.
    pub fn sessions(&self, cluster: &str, server: &str, minute: u64) -> String {
        format!("{}sessions:{cluster}:{server}:{minute}", self.prefix)
    }

    /// `holder`'s (one process's session table) Bloom filter of the sessions live on
    /// `cluster/server`.
    pub fn seen(&self, cluster: &str, server: &str, holder: &str) -> String {
        format!("{}seen:{cluster}:{server}:{holder}", self.prefix)
    }

    /// The holders that wrote a filter of `cluster/server`.
    pub fn seen_holders(&self, cluster: &str, server: &str) -> String {
        format!("{}seen:{cluster}:{server}", self.prefix)
    }

    /// Since when this Redis has held the fleet's session filters.
    pub fn watching(&self) -> String {
        format!("{}watching", self.prefix)
    }

    pub fn epoch(&self) -> String {
        format!("{}epoch", self.prefix)
    }
}

/// A partition table entry as stored: its clone, who learned it, how new it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionValue {
    pub version: u64,
    pub clone: String,
    pub instance: String,
}

/// An operator's change to one server, as stored. `state: None` means "back to the file".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerValue {
    pub version: u64,
    pub state: Option<ServerState>,
    pub weight: u32,
    pub instance: String,
}

pub fn partition_field(key: u64) -> String {
    format!("{key:016x}")
}

pub fn parse_partition_field(field: &[u8]) -> Option<u64> {
    if field.len() != 16 {
        return None;
    }
    let key = u64::from_str_radix(std::str::from_utf8(field).ok()?, 16).ok()?;
    (key != 0).then_some(key)
}

pub fn server_field(cluster: &str, server: &str) -> String {
    format!("{cluster}/{server}")
}

pub fn parse_server_field(field: &[u8]) -> Option<(&str, &str)> {
    let (c, s) = std::str::from_utf8(field).ok()?.split_once('/')?;
    (!c.is_empty() && !s.is_empty()).then_some((c, s))
}

/// A value's fields after the version; `None` unless `n` non-empty fields follow it.
fn split(value: &[u8], n: usize) -> Option<(u64, Vec<&str>)> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.split('|');
    let version = parts.next()?.parse().ok()?;
    let rest: Vec<&str> = parts.collect();
    (rest.len() == n && rest.iter().all(|p| !p.is_empty())).then_some((version, rest))
}

impl PartitionValue {
    pub fn encode(&self) -> String {
        format!("{}|{}|{}", self.version, self.clone, self.instance)
    }

    pub fn parse(value: &[u8]) -> Option<PartitionValue> {
        let (version, rest) = split(value, 2)?;
        Some(PartitionValue {
            version,
            clone: rest[0].to_string(),
            instance: rest[1].to_string(),
        })
    }
}

pub fn state_text(state: Option<ServerState>) -> &'static str {
    state.map_or("file", ServerState::name)
}

impl ServerValue {
    pub fn encode(&self) -> String {
        format!(
            "{}|{}|{}|{}",
            self.version,
            state_text(self.state),
            self.weight,
            self.instance
        )
    }

    pub fn parse(value: &[u8]) -> Option<ServerValue> {
        let (version, rest) = split(value, 3)?;
        let state = match rest[0] {
            "active" => Some(ServerState::Active),
            "draining" => Some(ServerState::Draining),
            "stopped" => Some(ServerState::Stopped),
            "file" => None,
            _ => return None,
        };
        let weight: u32 = rest[1].parse().ok()?;
        let weight_ok = (1..=crate::config::MAX_WEIGHT).contains(&weight);
        if state.is_some() && !weight_ok {
            return None;
        }
        Some(ServerValue {
            version,
            state,
            weight,
            instance: rest[2].to_string(),
        })
    }
}

/// A heartbeat as stored under the instance's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    pub ms: u64,
    pub partitions: u64,
    pub pid: u32,
    /// Empty when the writer predates origins.
    pub origin: String,
}

impl Beat {
    pub fn encode(&self) -> String {
        format!(
            "{}|{}|{}|{}",
            self.ms, self.partitions, self.pid, self.origin
        )
    }

    /// Lenient, as heartbeats only inform: missing or unreadable numbers are 0.
    pub fn parse(value: &[u8]) -> Beat {
        let text = String::from_utf8_lossy(value);
        let mut parts = text.split('|');
        let mut number = || {
            parts
                .next()
                .and_then(|p| p.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let (ms, partitions, pid) = (number(), number(), number());
        Beat {
            ms,
            partitions,
            pid: u32::try_from(pid).unwrap_or(0),
            origin: text.split('|').nth(3).unwrap_or("").to_string(),
        }
    }
}

/// The version a partition or server value starts with.
pub fn version_of(value: &[u8]) -> Option<u64> {
    let end = value.iter().position(|&b| b == b'|')?;
    std::str::from_utf8(&value[..end]).ok()?.parse().ok()
}

/// A Redis stream id (`<ms>-<seq>`) as a comparable pair.
pub fn stream_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_garbage_is_refused() {
        let p = PartitionValue {
            version: 1_764_000_000_123,
            clone: "14dtuu8g3".into(),
            instance: "edge-1".into(),
        };
        assert_eq!(PartitionValue::parse(p.encode().as_bytes()), Some(p));
        let s = ServerValue {
            version: 7,
            state: Some(ServerState::Draining),
            weight: 3,
            instance: "edge-2".into(),
        };
        assert_eq!(ServerValue::parse(s.encode().as_bytes()), Some(s));
        let back = ServerValue {
            version: 8,
            state: None,
            weight: 0,
            instance: "edge-2".into(),
        };
        assert_eq!(ServerValue::parse(back.encode().as_bytes()), Some(back));
        for junk in [
            &b""[..],
            b"|a|b",
            b"x|a|b",
            b"1|a",
            b"1|a|b|c",
            b"1||b",
            b"\xff\xfe|a|b",
            b"99999999999999999999999|a|b",
        ] {
            assert_eq!(PartitionValue::parse(junk), None, "{junk:?}");
        }
        for junk in [
            &b"1|drained|1|i"[..],
            b"1|active|0|i",
            b"1|active|1001|i",
            b"1|active|-1|i",
            b"1|active|1",
        ] {
            assert_eq!(ServerValue::parse(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn fields_and_ids_parse_strictly() {
        assert_eq!(partition_field(0xab), "00000000000000ab");
        assert_eq!(parse_partition_field(b"00000000000000ab"), Some(0xab));
        assert_eq!(parse_partition_field(b"0000000000000000"), None);
        assert_eq!(parse_partition_field(b"ab"), None);
        assert_eq!(parse_partition_field(b"zzzzzzzzzzzzzzzz"), None);
        assert_eq!(parse_server_field(b"ws/a"), Some(("ws", "a")));
        assert_eq!(parse_server_field(b"ws/"), None);
        assert_eq!(parse_server_field(b"wsa"), None);
        assert_eq!(stream_id("1764-3"), Some((1764, 3)));
        assert_eq!(stream_id("junk"), None);
        assert_eq!(version_of(b"1764|c1|a"), Some(1764));
        assert_eq!(version_of(b"x|c1|a"), None);
        assert_eq!(version_of(b"1764"), None);
        assert_eq!(Keys::new("t").partitions("ws"), "{t}:partitions:ws");
        let beat = Beat {
            ms: 1764,
            partitions: 6,
            pid: 42,
            origin: "00ff00ff00ff00ff".into(),
        };
        assert_eq!(Beat::parse(beat.encode().as_bytes()), beat);
        let old = Beat::parse(b"1764|6|42");
        assert_eq!((old.ms, old.pid, old.origin.as_str()), (1764, 42, ""));
        assert_eq!(Beat::parse(b"junk").ms, 0);
    }
}
