//! The seam between the gRPC front end and the brokers: a [`Backend`] takes a remoting
//! request and a [`Target`] and answers the broker's remoting response. Local mode's
//! bridge into the shards (WP7) and cluster mode's remoting client (WP9) implement it;
//! [`CannedBackend`] answers from a closure and records every request, for tests.
//!
//! Invariants: a backend call never blocks a tokio worker (it is a future); every call
//! ends (the server wraps it in `BACKEND_CALL_TIMEOUT_MS`); the recording test backend
//! keeps at most `CANNED_LOG_MAX` requests.

use ringmq_client::remoting::RemotingCommand;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// Any broker that can answer metadata questions (routes, topic and group configs).
    Metadata,
    /// The broker (a shard-broker `<name>-s<i>` in local mode) of that name: sends,
    /// transaction ends, queue requests.
    Broker(String),
    /// Every broker (heartbeats, unregistration); the backend answers SUCCESS only when
    /// all did, else the first failure.
    EveryBroker,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("no answer within {ms} ms")]
    Timeout { ms: u64 },
    #[error("{what} is full")]
    Busy { what: &'static str },
    #[error("no broker named {0}")]
    NoSuchBroker(String),
    #[error("backend unavailable: {0}")]
    Unavailable(String),
}

pub type BackendFuture<'a> = Pin<Box<dyn Future<Output = Result<RemotingCommand, BackendError>> + Send + 'a>>;

/// Sends remoting requests to the brokers.
pub trait Backend: Send + Sync + 'static {
    fn call(&self, target: Target, cmd: RemotingCommand) -> BackendFuture<'_>;
}

/// Most requests a [`CannedBackend`] remembers (tests send far fewer).
pub const CANNED_LOG_MAX: usize = 4096;

type Answer = dyn Fn(&Target, &RemotingCommand) -> Result<RemotingCommand, BackendError> + Send + Sync;

/// A backend whose answers come from a closure; it records `(target, request)` pairs.
#[derive(Clone)]
pub struct CannedBackend {
    answer: Arc<Answer>,
    log: Arc<Mutex<Vec<(Target, RemotingCommand)>>>,
}

impl CannedBackend {
    pub fn new(answer: impl Fn(&Target, &RemotingCommand) -> Result<RemotingCommand, BackendError> + Send + Sync + 'static) -> Self {
        Self { answer: Arc::new(answer), log: Arc::new(Mutex::new(Vec::new())) }
    }

    /// Answers SUCCESS with no header or body to everything.
    pub fn success() -> Self {
        Self::new(|_, cmd| Ok(cmd.create_response(0, None)))
    }

    /// The requests received so far, oldest first.
    pub fn requests(&self) -> Vec<(Target, RemotingCommand)> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl Backend for CannedBackend {
    fn call(&self, target: Target, cmd: RemotingCommand) -> BackendFuture<'_> {
        let answer = (self.answer)(&target, &cmd);
        if let Ok(mut log) = self.log.lock() {
            if log.len() < CANNED_LOG_MAX {
                log.push((target, cmd));
            }
        }
        Box::pin(async move { answer })
    }
}
