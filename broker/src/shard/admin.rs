//! What admin requests share: the private header fields the broker uses between its
//! shards (`LOCAL_ONLY_EXT`, `TOPICS_EXT`) and to log who changed state
//! (`CALLER_EXT`, stamped where the connection is and stripped from client requests),
//! required-field and JSON answer helpers, and `gather`, which asks every other shard
//! for its part of a whole-broker answer (`gather_broker_figures` for the per-broker
//! figures, which in shard route mode are the answering shard-broker's alone).
//!
//! The requests themselves live by concern: `metadata.rs` (topics, groups),
//! `client_info.rs` (clients), `broker_info.rs` (runtime info, broker config),
//! `queue_stats.rs` (topic and consume stats), `broker_stats.rs` (stats windows).
//!
//! Invariant: a per-shard part is plain JSON private to the broker; only the merged
//! answer has RocketMQ's form; one shard failing its part fails the whole answer.
//! Architecture Invariant: in shard route mode a figure a tool sums over the brokers of
//! a route or cluster (runtime info, stats windows, topic and consume stats, reset
//! tables) is answered for the asked shard-broker only, so summing shard-brokers counts
//! every message once; a host-wide figure appears only under a key labelled so
//! (`host.<key>` in runtime info).

use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use std::rc::Rc;
use super::{error_response, Shard};

/// Marks a per-shard sub-request (its value says which part is asked).
pub const LOCAL_ONLY_EXT: &str = "ringmqLocalOnly";

/// Topics of a per-shard GET_CONSUME_STATS, `;`-separated (as Java's `topicList`).
pub const TOPICS_EXT: &str = "ringmqTopics";

/// The caller (remote address) of a request that changes state, recorded by the shard
/// holding the connection so the shard that runs it (the metadata owner, for table
/// changes) can log who asked; stripped from client requests.
pub const CALLER_EXT: &str = "ringmqCaller";

/// Requests that change state: each is logged with its caller (`CALLER_EXT`).
pub const CALLER_LOGGED_CODES: [i32; 6] = [
    rq::UPDATE_AND_CREATE_TOPIC,
    rq::DELETE_TOPIC_IN_BROKER,
    rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    rq::DELETE_SUBSCRIPTIONGROUP,
    rq::UPDATE_BROKER_CONFIG,
    rq::INVOKE_BROKER_TO_RESET_OFFSET,
];

/// Who asked for `cmd`, for the log: the stamped caller, or "internal" for a request the
/// broker made itself (`call_internal`, never stamped).
pub(super) fn caller_of(cmd: &RemotingCommand) -> &str {
    cmd.ext(CALLER_EXT).unwrap_or("internal")
}

pub(super) fn required<'a>(cmd: &'a RemotingCommand, key: &str) -> Result<&'a str, RemotingCommand> {
    match cmd.ext(key).map(str::trim) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(error_response(cmd, rs::INVALID_PARAMETER, format!("missing header field {key}"))),
    }
}

pub(super) fn json_response(cmd: &RemotingCommand, body: Vec<u8>) -> RemotingCommand {
    let mut r = cmd.create_response(rs::SUCCESS, None);
    r.body = body.into();
    r
}

impl<R: crate::rt::Runtime> Shard<R> {
    /// Asks every other shard for its part of `cmd` (marked `LOCAL_ONLY_EXT = part`)
    /// and returns their JSON answers; a shard that fails makes the whole answer fail.
    pub(super) async fn gather(self: &Rc<Self>, cmd: &RemotingCommand, part: &str) -> Result<Vec<serde_json::Value>, RemotingCommand> {
        let mut parts = Vec::new();
        for shard in (0..self.place.count).filter(|&s| s != self.place.id) {
            let r = self.mesh.call(shard, cmd.clone().with_ext(LOCAL_ONLY_EXT, part)).await;
            if r.code != rs::SUCCESS {
                return Err(error_response(cmd, r.code, r.remark.unwrap_or_default()));
            }
            if r.body.is_empty() {
                // A part that only acts (offsets removed) answers no body.
                parts.push(serde_json::Value::Null);
                continue;
            }
            match serde_json::from_slice(&r.body) {
                Ok(v) => parts.push(v),
                Err(e) => return Err(error_response(cmd, rs::SYSTEM_ERROR, format!("shard {shard} answered badly: {e}"))),
            }
        }
        Ok(parts)
    }

    /// `gather` for a per-broker figure: the other shards' parts in host route mode
    /// (one broker identity: the answer covers every shard), none in shard route mode,
    /// where each shard is a broker of its own and a tool asks each shard-broker in turn
    /// (mqadmin and the dashboard sum over the brokers of a route or cluster: gathering
    /// here counted every message once per shard-broker).
    pub(super) async fn gather_broker_figures(self: &Rc<Self>, cmd: &RemotingCommand, part: &str) -> Result<Vec<serde_json::Value>, RemotingCommand> {
        if self.route_mode() == crate::config::RouteMode::Shard {
            return Ok(Vec::new());
        }
        self.gather(cmd, part).await
    }
}
