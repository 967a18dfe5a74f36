//! Consumers: the pull consumer (assign queues, poll, seek, commit) and the push
//! consumer (rebalanced long-polling pull loops feeding a listener), and what they
//! share.
//!
//! Layout:
//! - `kernel`: the broker calls (pull, offsets, locks, group membership) as functions;
//! - `subscription`: tag expressions, filtered by hash on the broker and exactly here;
//! - `rebalance`: RocketMQ's average allocation of queues to group members;
//! - `offsets`: where consumed offsets live (the broker, or a local file for
//!   broadcasting) and the commit point of a queue with messages still in flight;
//! - `retry`: RocketMQ's retry and dead-letter policy (what a push consumer sends back,
//!   with which delay level, and what it retries locally);
//! - `pull`, `push`: the two consumers.
//!
//! Architecture invariant: a consumer never commits an offset past a message that was
//! delivered to its listener and not yet acknowledged (at-least-once delivery).

pub mod kernel;
pub mod offsets;
pub mod pull;
pub mod push;
pub mod rebalance;
pub mod retry;
pub mod subscription;

pub use crate::remoting::bodies::MessageQueue;
pub use crate::remoting::heartbeat::MessageModel;
pub use pull::{PullConsumer, PullConsumerConfig};
pub use push::{ConsumeConcurrentlyContext, ConsumeOrderlyStatus, ConsumeStatus, PushConsumer, PushConsumerConfig};
pub use subscription::{MessageSelector, Subscription};

/// Where a consumer group with no committed offset for a queue starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeFrom {
    /// New messages only (the queue's max offset).
    LastOffset,
    /// Everything still stored (the queue's min offset).
    FirstOffset,
    /// The first message stored at or after this time (ms since the epoch).
    Timestamp(i64),
}
