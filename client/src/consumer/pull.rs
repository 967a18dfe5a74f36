//! The pull consumer: the application assigns queues and polls; the consumer keeps a
//! position per queue and commits positions to the broker when asked (RocketMQ's
//! `DefaultLitePullConsumer` in assign mode).
//!
//! Invariants:
//! - `poll` returns messages of one queue in offset order and advances that queue's
//!   position past them; `commit` writes positions, so a restart after a commit resumes
//!   exactly after the last message polled before it;
//! - a queue's first position is its committed offset, else the `consume_from` policy;
//! - `poll` waits at most its timeout.

use super::kernel::{self, PullRequest, PullResult, PullStatus};
use super::subscription::Subscription;
use super::ConsumeFrom;
use crate::error::ClientError;
use crate::instance::{ClientConfig, ClientInstance};
use crate::message::MessageExt;
use crate::remoting::bodies::MessageQueue;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long `poll` sleeps after a round in which no assigned queue had anything.
pub const POLL_IDLE_SLEEP_MS: u64 = 20;

#[derive(Debug, Clone)]
pub struct PullConsumerConfig {
    pub client: ClientConfig,
    pub group: String,
    /// Messages asked for per pull request.
    pub pull_batch_size: i32,
    pub consume_from: ConsumeFrom,
}

impl PullConsumerConfig {
    pub fn new(client: ClientConfig, group: impl Into<String>) -> Self {
        Self { client, group: group.into(), pull_batch_size: 32, consume_from: ConsumeFrom::LastOffset }
    }
}

struct Assigned {
    subscription: Subscription,
    /// None until resolved from the committed offset or the policy.
    position: Option<i64>,
}

pub struct PullConsumer {
    instance: Rc<ClientInstance>,
    config: PullConsumerConfig,
    assigned: RefCell<BTreeMap<MessageQueue, Assigned>>,
    next: Cell<usize>,
}

impl PullConsumer {
    pub async fn start(config: PullConsumerConfig) -> Result<Self, ClientError> {
        if config.group.is_empty() {
            return Err(ClientError::Config("consumer group is empty".into()));
        }
        if !(1..=1024).contains(&config.pull_batch_size) {
            return Err(ClientError::Config(format!("pull_batch_size {} is outside 1..=1024", config.pull_batch_size)));
        }
        let instance = ClientInstance::start(config.client.clone())?;
        Ok(Self { instance, config, assigned: RefCell::new(BTreeMap::new()), next: Cell::new(0) })
    }

    pub fn instance(&self) -> &Rc<ClientInstance> {
        &self.instance
    }

    /// The topic's readable queues.
    pub async fn fetch_queues(&self, topic: &str) -> Result<Vec<MessageQueue>, ClientError> {
        let route = self.instance.fetch_route(topic).await?;
        if route.read_queues.is_empty() {
            return Err(ClientError::NoRoute { topic: topic.to_string() });
        }
        Ok(route.read_queues.clone())
    }

    /// Reads `queues` from now on, filtered by `expression`; replaces the assignment.
    pub async fn assign(&self, queues: &[MessageQueue], expression: &str) -> Result<(), ClientError> {
        for q in queues {
            self.instance.route(&q.topic).await?;
        }
        let mut assigned = self.assigned.borrow_mut();
        assigned.retain(|q, _| queues.contains(q));
        for q in queues {
            assigned.entry(q.clone()).or_insert_with(|| Assigned { subscription: Subscription::new(&q.topic, expression), position: None });
        }
        Ok(())
    }

    pub fn assignment(&self) -> Vec<MessageQueue> {
        self.assigned.borrow().keys().cloned().collect()
    }

    fn set_position(&self, queue: &MessageQueue, offset: i64) -> Result<(), ClientError> {
        match self.assigned.borrow_mut().get_mut(queue) {
            Some(a) => {
                a.position = Some(offset);
                Ok(())
            }
            None => Err(ClientError::Config(format!("queue {queue:?} is not assigned"))),
        }
    }

    pub fn seek(&self, queue: &MessageQueue, offset: i64) -> Result<(), ClientError> {
        self.set_position(queue, offset.max(0))
    }

    pub async fn seek_to_begin(&self, queue: &MessageQueue) -> Result<(), ClientError> {
        let o = kernel::min_offset(&self.instance, queue).await?;
        self.set_position(queue, o)
    }

    pub async fn seek_to_end(&self, queue: &MessageQueue) -> Result<(), ClientError> {
        let o = kernel::max_offset(&self.instance, queue).await?;
        self.set_position(queue, o)
    }

    pub async fn seek_to_time(&self, queue: &MessageQueue, timestamp_ms: i64) -> Result<(), ClientError> {
        let o = kernel::search_offset(&self.instance, queue, timestamp_ms).await?;
        self.set_position(queue, o)
    }

    /// The next offset `poll` reads from `queue`, resolving it if needed.
    pub async fn position(&self, queue: &MessageQueue) -> Result<i64, ClientError> {
        let known = self.assigned.borrow().get(queue).map(|a| a.position);
        match known {
            None => Err(ClientError::Config(format!("queue {queue:?} is not assigned"))),
            Some(Some(p)) => Ok(p),
            Some(None) => {
                let p = match kernel::query_offset(&self.instance, &self.config.group, queue).await? {
                    Some(o) => o,
                    None => kernel::start_offset_by_policy(&self.instance, queue, self.config.consume_from).await?,
                };
                self.set_position(queue, p)?;
                Ok(p)
            }
        }
    }

    /// The group's committed offset on `queue` (None: never committed).
    pub async fn committed(&self, queue: &MessageQueue) -> Result<Option<i64>, ClientError> {
        kernel::query_offset(&self.instance, &self.config.group, queue).await
    }

    /// One pull of `queue` from `offset`, without touching positions.
    pub async fn pull(&self, queue: &MessageQueue, expression: &str, offset: i64, max_messages: i32) -> Result<PullResult, ClientError> {
        self.instance.route(&queue.topic).await?;
        let subscription = Subscription::new(&queue.topic, expression);
        let req = PullRequest {
            group: &self.config.group,
            queue,
            offset,
            max_messages,
            subscription: &subscription,
            commit_offset: None,
            suspend_ms: 0,
            timeout: self.instance.request_timeout(),
        };
        kernel::pull(&self.instance, &req).await
    }

    /// Messages from the next assigned queue that has some (round-robin), waiting up to
    /// `timeout`; empty when none arrived.
    pub async fn poll(&self, timeout: Duration) -> Result<Vec<MessageExt>, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            let queues = self.assignment();
            if queues.is_empty() {
                return Err(ClientError::Config("no queue assigned: call assign first".into()));
            }
            for i in 0..queues.len() {
                let index = (self.next.get() + i) % queues.len();
                let queue = &queues[index];
                let offset = self.position(queue).await?;
                let subscription = match self.assigned.borrow().get(queue) {
                    Some(a) => a.subscription.clone(),
                    None => continue,
                };
                let req = PullRequest {
                    group: &self.config.group,
                    queue,
                    offset,
                    max_messages: self.config.pull_batch_size,
                    subscription: &subscription,
                    commit_offset: None,
                    suspend_ms: 0,
                    timeout: self.instance.request_timeout(),
                };
                let result = kernel::pull(&self.instance, &req).await?;
                match result.status {
                    PullStatus::Found | PullStatus::NoMatchedMessage | PullStatus::OffsetIllegal => {
                        if result.status == PullStatus::OffsetIllegal {
                            tracing::warn!(?queue, offset, next = result.next_begin_offset, "offset outside the queue; moving");
                        }
                        self.set_position(queue, result.next_begin_offset)?;
                    }
                    PullStatus::NoNewMessage => {}
                }
                if !result.messages.is_empty() {
                    self.next.set(index + 1);
                    return Ok(result.messages);
                }
            }
            if Instant::now() >= deadline {
                return Ok(Vec::new());
            }
            glommio::timer::sleep(Duration::from_millis(POLL_IDLE_SLEEP_MS).min(deadline - Instant::now())).await;
        }
    }

    /// Commits `offset` (the next message to read) for `queue`.
    pub async fn commit(&self, queue: &MessageQueue, offset: i64) -> Result<(), ClientError> {
        kernel::commit_offset(&self.instance, &self.config.group, queue, offset).await
    }

    /// Commits every assigned queue's position.
    pub async fn commit_all(&self) -> Result<(), ClientError> {
        let positions: Vec<(MessageQueue, i64)> =
            self.assigned.borrow().iter().filter_map(|(q, a)| a.position.map(|p| (q.clone(), p))).collect();
        for (q, p) in positions {
            self.commit(&q, p).await?;
        }
        Ok(())
    }

    pub async fn shutdown(&self) {
        self.instance.shutdown().await;
    }
}
