//! Remoting answer → gRPC `Status` (docs/design/pop-grpc.md §3.3), as Apache's proxy
//! `ResponseBuilder` plus the send-status and proxy-exception mappings it applies
//! elsewhere, and the front end's own error type.
//!
//! Invariant: every remoting code maps to exactly one `Code` (`REMOTING_TO_GRPC` has no
//! duplicate, checked by a test); a code not in the table is INTERNAL_SERVER_ERROR, as
//! Apache's `getOrDefault`. A status message is never empty (Apache: the remark, else the
//! remoting code's number, else the gRPC code's name).

use crate::pb::{self, Code};
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::RemotingCommand;

/// POLLING_FULL / POLLING_TIMEOUT (`ResponseCode.java:77-79`), not in the client's table.
pub const POLLING_FULL: i32 = 209;
pub const POLLING_TIMEOUT: i32 = 210;

/// `(remoting code, gRPC code, where Apache decides it)`.
pub const REMOTING_TO_GRPC: &[(i32, Code, &str)] = &[
    (rs::SUCCESS, Code::Ok, "ResponseBuilder"),
    (rs::SYSTEM_BUSY, Code::TooManyRequests, "ResponseBuilder"),
    (rs::REQUEST_CODE_NOT_SUPPORTED, Code::NotImplemented, "ResponseBuilder"),
    (rs::SUBSCRIPTION_GROUP_NOT_EXIST, Code::ConsumerGroupNotFound, "ResponseBuilder"),
    (rs::TOPIC_NOT_EXIST, Code::TopicNotFound, "TopicRouteHelper.isTopicNotExistError"),
    (rs::FLUSH_DISK_TIMEOUT, Code::MasterPersistenceTimeout, "SendMessageActivity (FLUSH_DISK_TIMEOUT)"),
    (rs::FLUSH_SLAVE_TIMEOUT, Code::SlavePersistenceTimeout, "SendMessageActivity (FLUSH_SLAVE_TIMEOUT)"),
    (rs::SLAVE_NOT_AVAILABLE, Code::HaNotAvailable, "SendMessageActivity (SLAVE_NOT_AVAILABLE)"),
    (rs::SERVICE_NOT_AVAILABLE, Code::HaNotAvailable, "RingMQ: slave or fenced master"),
    (rs::NO_PERMISSION, Code::Forbidden, "ProxyExceptionCode.FORBIDDEN / authorization"),
    (rs::INVALID_PARAMETER, Code::BadRequest, "RingMQ: the request's own fault"),
    (rs::MESSAGE_ILLEGAL, Code::BadRequest, "RingMQ: the request's own fault"),
    (rs::SUBSCRIPTION_PARSE_FAILED, Code::IllegalFilterExpression, "ReceiveMessageActivity"),
    (rs::NO_MESSAGE, Code::MessageNotFound, "ReceiveMessageResponseStreamWriter (NO_MESSAGE)"),
    (POLLING_FULL, Code::TooManyRequests, "ReceiveMessageResponseStreamWriter (POLLING_FULL)"),
    (POLLING_TIMEOUT, Code::MessageNotFound, "ReceiveMessageResponseStreamWriter (POLLING_TIMEOUT)"),
    (rs::FLOW_CONTROL, Code::TooManyRequests, "RingMQ: back-pressure, retriable"),
];

/// The gRPC code of a remoting response code.
pub fn code_for(remoting_code: i32) -> Code {
    REMOTING_TO_GRPC.iter().find(|(c, _, _)| *c == remoting_code).map(|(_, g, _)| *g).unwrap_or(Code::InternalServerError)
}

/// A status with `message`, or the code's name when `message` is empty.
pub fn status(code: Code, message: impl Into<String>) -> pb::Status {
    let message = message.into();
    let message = if message.is_empty() { code.as_str_name().to_string() } else { message };
    pb::Status { code: code as i32, message }
}

/// `Status{OK, "OK"}`.
pub fn ok() -> pb::Status {
    status(Code::Ok, "")
}

/// The status a remoting answer stands for: its code mapped, its remark (else its code's
/// number) as the message.
pub fn from_response(response: &RemotingCommand) -> pb::Status {
    let code = code_for(response.code);
    if code == Code::Ok {
        return ok();
    }
    let message = response.remark.clone().filter(|r| !r.is_empty()).unwrap_or_else(|| response.code.to_string());
    status(code, message)
}

/// A failed RPC: the proto status the client receives in the response's `status`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct GrpcError {
    pub code: Code,
    pub message: String,
}

impl GrpcError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    pub fn to_status(&self) -> pb::Status {
        status(self.code, self.message.clone())
    }

    /// A remoting answer that was not SUCCESS.
    pub fn from_response(response: &RemotingCommand) -> Self {
        let s = from_response(response);
        Self { code: Code::try_from(s.code).unwrap_or(Code::InternalServerError), message: s.message }
    }
}

impl From<crate::backend::BackendError> for GrpcError {
    fn from(e: crate::backend::BackendError) -> Self {
        use crate::backend::BackendError;
        // Apache: RemotingTimeoutException → PROXY_TIMEOUT, anything else internal.
        let code = match e {
            BackendError::Timeout { .. } => Code::ProxyTimeout,
            BackendError::Busy { .. } => Code::TooManyRequests,
            BackendError::Unavailable(_) | BackendError::NoSuchBroker(_) => Code::InternalServerError,
        };
        Self::new(code, e.to_string())
    }
}

/// Ok when `response` is SUCCESS, else its status as an error.
pub fn expect_success(response: RemotingCommand) -> Result<RemotingCommand, GrpcError> {
    if response.code == rs::SUCCESS {
        Ok(response)
    } else {
        Err(GrpcError::from_response(&response))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(remoting_code: i32, remark: Option<&str>, expected: (Code, &str)) {
        let mut r = RemotingCommand::request(0).create_response(remoting_code, remark);
        r.remark = remark.map(str::to_string);
        let s = from_response(&r);
        assert_eq!((Code::try_from(s.code).unwrap(), s.message.as_str()), expected, "remoting code {remoting_code}");
    }

    #[test]
    fn every_table_row() {
        for &(remoting, grpc, source) in REMOTING_TO_GRPC {
            let expected_message = if grpc == Code::Ok { "OK".to_string() } else { "remark".to_string() };
            let r = RemotingCommand::request(0).create_response(remoting, Some("remark"));
            let s = from_response(&r);
            assert_eq!((s.code, s.message), (grpc as i32, expected_message), "{remoting} ({source})");
        }
    }

    #[test]
    fn answers() {
        check(rs::SUCCESS, Some("ignored"), (Code::Ok, "OK"));
        check(rs::TOPIC_NOT_EXIST, Some("No topic in this broker. topic: T"), (Code::TopicNotFound, "No topic in this broker. topic: T"));
        check(rs::SUBSCRIPTION_GROUP_NOT_EXIST, None, (Code::ConsumerGroupNotFound, "26"));
        check(rs::NO_PERMISSION, Some(""), (Code::Forbidden, "16"));
        check(rs::SYSTEM_BUSY, Some("busy"), (Code::TooManyRequests, "busy"));
        check(rs::FLUSH_DISK_TIMEOUT, None, (Code::MasterPersistenceTimeout, "10"));
        check(rs::FLUSH_SLAVE_TIMEOUT, None, (Code::SlavePersistenceTimeout, "12"));
        check(rs::SLAVE_NOT_AVAILABLE, None, (Code::HaNotAvailable, "11"));
        check(rs::SERVICE_NOT_AVAILABLE, None, (Code::HaNotAvailable, "14"));
        check(rs::REQUEST_CODE_NOT_SUPPORTED, Some("x"), (Code::NotImplemented, "x"));
        check(POLLING_FULL, None, (Code::TooManyRequests, "209"));
        check(rs::SYSTEM_ERROR, Some("boom"), (Code::InternalServerError, "boom"));
        check(12345, None, (Code::InternalServerError, "12345"));
    }

    #[test]
    fn table_has_no_duplicate_remoting_code() {
        for (i, a) in REMOTING_TO_GRPC.iter().enumerate() {
            assert!(REMOTING_TO_GRPC[i + 1..].iter().all(|b| b.0 != a.0), "{} twice", a.0);
        }
    }

    #[test]
    fn backend_errors() {
        use crate::backend::BackendError;
        let cases = [
            (BackendError::Timeout { ms: 3000 }, Code::ProxyTimeout),
            (BackendError::Busy { what: "shard queue" }, Code::TooManyRequests),
            (BackendError::Unavailable("closed".into()), Code::InternalServerError),
            (BackendError::NoSuchBroker("b".into()), Code::InternalServerError),
        ];
        for (e, code) in cases {
            assert_eq!(GrpcError::from(e).code, code);
        }
    }

    #[test]
    fn empty_message_is_the_code_name() {
        assert_eq!(status(Code::Forbidden, "").message, "FORBIDDEN");
        assert_eq!(ok().message, "OK");
    }
}
