//! The phases a script may define.

/// The phases a script may define, as the names of its table's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Request,
    Route,
    UpstreamRequest,
    UpstreamResponse,
    Response,
    Log,
}

pub const PHASES: [Phase; 6] = [
    Phase::Request,
    Phase::Route,
    Phase::UpstreamRequest,
    Phase::UpstreamResponse,
    Phase::Response,
    Phase::Log,
];

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Request => "request",
            Phase::Route => "route",
            Phase::UpstreamRequest => "upstream_request",
            Phase::UpstreamResponse => "upstream_response",
            Phase::Response => "response",
            Phase::Log => "log",
        }
    }
}
