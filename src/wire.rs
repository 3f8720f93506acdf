//! Wire formats, pure: HTTP/1 syntax, AJP/1.3 packets, content codings.

pub mod ajp;
pub mod coding;
pub mod http1;
