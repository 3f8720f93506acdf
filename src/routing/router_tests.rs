//! Table-driven tests of the routing decision.
