//! Listeners and front ends: a listener's connections (accept, TLS, the HTTP version), and the
//! front ends that carry the pipeline for each: tether's HTTP/1 engine, its HTTP/2 front
//! end and its HTTP/3 front end over the request streams of multiplexed protocols, and
//! Pingora's proxy.

pub mod engine;
pub mod head_limit;
pub mod http2;
pub mod http3;
pub mod listener;
pub mod proxy;
pub mod streams;
