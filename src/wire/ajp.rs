//! AJP/1.3, the protocol mod_jk and `mod_proxy_ajp` speak to Tomcat, JBoss and WildFly
//! (the Apache Tomcat Connectors' AJPv13 reference, and Tomcat's `org.apache.coyote.ajp`):
//! its packets (`packet.rs`), the request tether forwards (`request.rs`) and the messages
//! a server answers with (`response.rs`). Pure: no I/O, every read bounded by the packet.

pub mod packet;
pub mod request;
pub mod response;

pub use packet::{Malformed, TooLarge, DEFAULT_PACKET_SIZE, MAX_PACKET_SIZE};
pub use request::{
    body_packet, body_packet_header, cping, forward_request, Forward, Tls, END_OF_BODY,
};
pub use response::{Message, ResponseHeaders, CPONG_PACKET};
