//! A health check that is an AJP CPing (mod_jk's `ping_mode`): a connection to the
//! server's AJP port, the CPing packet, and its CPong within the check's timeout. It asks
//! the servlet container itself, not only whether its port takes connections.

use async_trait::async_trait;
use pingora_error::{Error, ErrorType, Result};
use pingora_load_balancing::health_check::HealthCheck;
use pingora_load_balancing::Backend;
use std::time::Duration;

pub struct CpingCheck {
    pub timeout: Duration,
}

#[async_trait]
impl HealthCheck for CpingCheck {
    async fn check(&self, target: &Backend) -> Result<()> {
        let Some(addr) = target.addr.as_inet() else {
            return Error::e_explain(ErrorType::ConnectError, "not an inet address");
        };
        let exchange = async {
            let mut s = tokio::net::TcpStream::connect(addr).await?;
            crate::pipeline::upstream::ajp::cping(&mut s).await
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => Error::e_explain(
                ErrorType::CustomCode("no CPong", 0),
                "the answer to a CPing was not a CPong",
            ),
            Ok(Err(e)) => Error::e_because(ErrorType::ConnectError, "AJP CPing", e),
            Err(_) => Error::e_explain(ErrorType::ConnectTimedout, "no CPong in time"),
        }
    }

    fn health_threshold(&self, _success: bool) -> usize {
        // tether's own rise/fall counts decide (`health.rs`).
        1
    }
}
