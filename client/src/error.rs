//! The client's typed errors. Each variant says what went wrong *and* what the caller
//! can do about it, because the caller is usually an application operator reading a
//! log line, not the author of this crate.
//!
//! Invariant: `is_retriable` is the single place that decides whether a send may be
//! retried on another queue or broker; the producer's retry loop asks nothing else.

use crate::remoting::codes::response_code as rs;
use crate::remoting::{BodyError, CommandError, HeaderError};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid client configuration: {0}")]
    Config(String),
    #[error("no NameServer answered (tried {addrs:?}): check `namesrv_addrs` and that a NameServer is running")]
    NameServerUnreachable { addrs: Vec<String> },
    #[error("no route for topic `{topic}`: create it on a broker (e.g. `mqadmin updateTopic`) and check that the broker registered with the NameServer")]
    NoRoute { topic: String },
    #[error("topic `{topic}` has no writable queue on any reachable broker: check broker permissions and that brokers are up")]
    NoWritableQueue { topic: String },
    #[error("cannot connect to {addr}: {reason}; check that the broker is up and reachable")]
    Connect { addr: String, reason: String },
    #[error("connection to {addr} closed before the answer came: the broker stopped or dropped the connection; retry")]
    ConnectionClosed { addr: String },
    #[error("no answer from {addr} to request {code} within {timeout_ms} ms: the broker is overloaded or unreachable; retry or raise the timeout")]
    Timeout { addr: String, code: i32, timeout_ms: u64 },
    #[error("broker {addr} is busy ({remark}): slow down or add brokers; retry later")]
    BrokerBusy { addr: String, remark: String },
    #[error("message {msg_id} was stored on {addr} but not flushed in time ({status}): it may or may not survive a crash; resend if it must be durable (a duplicate is possible)")]
    FlushTimeout { addr: String, msg_id: String, status: &'static str },
    #[error("no permission on {addr} ({remark}): the topic or broker is read-only or write-only for this operation")]
    NoPermission { addr: String, remark: String },
    #[error("topic does not exist on {addr} ({remark}): create it first")]
    TopicNotExist { addr: String, remark: String },
    #[error("message refused by {addr} ({remark}): check its size, topic name and properties")]
    MessageIllegal { addr: String, remark: String },
    #[error("broker {addr} answered code {code} ({remark})")]
    Broker { addr: String, code: i32, remark: String },
    #[error("send failed after {attempts} attempts in {elapsed_ms} ms; last error: {last}")]
    RetriesExhausted { attempts: u32, elapsed_ms: u64, last: Box<ClientError> },
    #[error("could not encode or decode a command: {0}")]
    Protocol(String),
    #[error("invalid message: {0}")]
    InvalidMessage(#[from] crate::message::MessageError),
    #[error("the client was shut down")]
    ShutDown,
    #[error("request to topic `{topic}` was sent, but no reply came within {timeout_ms} ms: the replier is slow, down, or not subscribed; raise the timeout or check the replier")]
    RequestTimeout { topic: String, timeout_ms: u64 },
    #[error("{max} requests already wait for replies on this client: wait for some to end or use another producer")]
    RequestsFull { max: usize },
    #[error("cannot reply: {0}")]
    ReplyMessage(String),
    #[error("local offset store {path}: {reason}")]
    OffsetStore { path: String, reason: String },
}

impl ClientError {
    /// Whether another attempt, on another queue or broker, may succeed.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            ClientError::Connect { .. }
                | ClientError::ConnectionClosed { .. }
                | ClientError::Timeout { .. }
                | ClientError::BrokerBusy { .. }
                | ClientError::TopicNotExist { .. }
                | ClientError::NoWritableQueue { .. }
                | ClientError::Broker { .. }
        )
    }

    /// The typed error for a non-success response code of a broker.
    pub fn from_response(addr: &str, code: i32, remark: Option<&str>) -> Self {
        let remark = remark.unwrap_or("").to_string();
        let addr = addr.to_string();
        match code {
            rs::SYSTEM_BUSY | rs::FLOW_CONTROL => ClientError::BrokerBusy { addr, remark },
            rs::NO_PERMISSION => ClientError::NoPermission { addr, remark },
            rs::TOPIC_NOT_EXIST => ClientError::TopicNotExist { addr, remark },
            rs::MESSAGE_ILLEGAL => ClientError::MessageIllegal { addr, remark },
            _ => ClientError::Broker { addr, code, remark },
        }
    }
}

impl From<CommandError> for ClientError {
    fn from(e: CommandError) -> Self {
        ClientError::Protocol(e.to_string())
    }
}

impl From<HeaderError> for ClientError {
    fn from(e: HeaderError) -> Self {
        ClientError::Protocol(e.to_string())
    }
}

impl From<BodyError> for ClientError {
    fn from(e: BodyError) -> Self {
        ClientError::Protocol(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(code: i32, expected_retriable: bool, expected_text: &str) {
        let e = ClientError::from_response("b:1", code, Some("why"));
        assert_eq!(e.is_retriable(), expected_retriable, "{e}");
        assert!(e.to_string().contains(expected_text), "{e}");
    }

    #[test]
    fn response_codes_map_to_errors_that_say_what_to_do() {
        check(rs::SYSTEM_BUSY, true, "slow down");
        check(rs::FLOW_CONTROL, true, "busy");
        check(rs::NO_PERMISSION, false, "read-only");
        check(rs::TOPIC_NOT_EXIST, true, "create it first");
        check(rs::MESSAGE_ILLEGAL, false, "size");
        check(rs::SYSTEM_ERROR, true, "code 1");
        check(rs::SERVICE_NOT_AVAILABLE, true, "code 14");
    }
}
