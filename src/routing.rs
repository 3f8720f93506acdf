//! The routing decision (DESIGN section 2): pure code over a request head and live state.
//!
//! [`ClusterRouter::decide`] reads the session id, resolves its affinity token, and returns
//! the server to use and why. Retries call it again with the servers already tried, which
//! walks the same ordered candidate list without building it up front.

pub mod routes;

mod clock;
mod decision;
mod fields;
pub mod fleet_seen;
mod live;
mod live_sessions;
mod partitions;
mod ring;
mod router;
mod session_id;
mod session_sketch;
mod slots;
mod tried;
mod wrr;
mod wspt;

pub use clock::{ms_at, now_ms};
pub use decision::{Decision, Outcome, Reject};
pub use fields::Fields;
pub use live::{Bytes, Health, ServerLive};
pub use live_sessions::{join_fleet, LiveSessions, ServerSessions, Touch};
pub use partitions::{clone_tag, partition_key, wall_ms, Change, Insert, PartitionTable};
pub use router::learn::Learned;
pub use router::{ClusterRouter, Explained, ServerSlot, Timeouts};
pub use session_id::{cookie_values, path_parameter, MAX_SESSION_ID_LEN};
pub use session_sketch::{wall_minute, SessionSketch, DENSE_BYTES};
pub use slots::{set_fleet_size, share, Full, Slot, Slots, Waiters};
pub use tried::Tried;
pub use wspt::{parse as parse_wspt, WsptError, MAX_WSPT_ENTRIES, MAX_WSPT_LEN};
