//! The trace dispatcher (Java's `AsyncTraceDispatcher`): a bounded queue of trace
//! records that a background task sends, in batches, to the trace topic through its
//! own producer (group `_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>`, tracing
//! off), each trace message's `KEYS` being the traced messages' ids and keys.
//!
//! A batch goes when [`TRACE_BATCH_CONTEXTS_MAX`] records wait, when the oldest has
//! waited [`TRACE_FLUSH_INTERVAL_MS`], or at `flush` / `shutdown`. Records of one
//! traced topic are joined into one message body of about
//! [`TRACE_MESSAGE_BYTES_MAX`] at most, as Java groups them.
//!
//! Invariants: `append` never waits and never does IO (the send path calls it); at
//! most [`TRACE_QUEUE_CONTEXTS_MAX`] records wait, a record past that is dropped and
//! counted (`dropped`); a failed trace send is logged and counted, never retried and
//! never an error of the traced send or consume; after `flush` returns every record
//! appended before it was sent or failed (no send of this dispatcher is in flight).

use super::encoder::{encode, TraceContext, TraceTransfer};
use crate::error::ClientError;
use crate::instance::ClientConfig;
use crate::message::Message;
use crate::msgid::MsgIdGenerator;
use crate::producer::{Producer, ProducerConfig};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::sync::Semaphore;
use glommio::task::JoinHandle;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Records waiting to be sent, at most (Java's `traceContextQueue` capacity).
pub const TRACE_QUEUE_CONTEXTS_MAX: usize = 2048;
/// Records taken per batch, at most (Java caps `batchNum` at 20).
pub const TRACE_BATCH_CONTEXTS_MAX: usize = 20;
/// How long a record waits for its batch to fill, at most (Java's `flushTraceInterval`).
pub const TRACE_FLUSH_INTERVAL_MS: u64 = 5_000;
/// A trace message's body is cut once it reaches this many bytes (Java's `maxMsgSize`).
pub const TRACE_MESSAGE_BYTES_MAX: usize = 128_000;
/// Time budget of one trace send (Java's trace producer `sendMsgTimeout`).
pub const TRACE_SEND_TIMEOUT_MS: u64 = 5_000;
/// Java's `TraceConstants.GROUP_NAME_PREFIX`.
pub const TRACE_GROUP_PREFIX: &str = "_INNER_TRACE_PRODUCER";

/// Numbers the inner producers' groups, as Java's `COUNTER`.
static TRACE_PRODUCERS: AtomicU64 = AtomicU64::new(0);

/// Whose traces a dispatcher sends (Java's `TraceDispatcher.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceRole {
    Produce,
    Consume,
}

impl TraceRole {
    fn name(self) -> &'static str {
        match self {
            TraceRole::Produce => "PRODUCE",
            TraceRole::Consume => "CONSUME",
        }
    }
}

struct Queued {
    at: Instant,
    ctx: TraceContext,
}

struct Inner {
    topic: String,
    producer: Producer,
    queue: RefCell<VecDeque<Queued>>,
    /// Wakes the worker; capacity 1, a full channel already says "look again".
    wake: LocalSender<()>,
    /// One batch in flight at a time: `flush` waits on it for the worker's batch.
    sending: Semaphore,
    dropped: Cell<u64>,
    sent_messages: Cell<u64>,
    failed_messages: Cell<u64>,
    worker: RefCell<Option<JoinHandle<()>>>,
    /// Request ids tying a SubAfter to its SubBefore (Java's `createUniqID`).
    ids: MsgIdGenerator,
}

/// Queues trace records and sends them to the trace topic. Cheap to clone (shared).
#[derive(Clone)]
pub struct TraceDispatcher {
    inner: Rc<Inner>,
}

impl TraceDispatcher {
    /// Starts the inner producer and the worker on the current glommio executor.
    pub fn start(client: &ClientConfig, group: &str, role: TraceRole, topic: &str) -> Result<Self, ClientError> {
        let n = TRACE_PRODUCERS.fetch_add(1, Ordering::Relaxed) + 1;
        let mut config = ProducerConfig::new(client.clone(), format!("{TRACE_GROUP_PREFIX}-{group}-{}-{n}", role.name()));
        config.send_timeout_ms = TRACE_SEND_TIMEOUT_MS;
        // The default instance name is unique per instance, so the trace producer never
        // shares the traced client's connections or group table.
        config.client.instance_name = None;
        let producer = Producer::start_untraced(config)?;
        let ids = MsgIdGenerator::new(producer.instance().client_ip, std::process::id(), crate::producer::random_u32());
        let (wake, woken) = local_channel::new_bounded(1);
        let inner = Rc::new(Inner {
            topic: topic.to_string(),
            producer,
            queue: RefCell::new(VecDeque::new()),
            wake,
            sending: Semaphore::new(1),
            dropped: Cell::new(0),
            sent_messages: Cell::new(0),
            failed_messages: Cell::new(0),
            worker: RefCell::new(None),
            ids,
        });
        // The worker holds the dispatcher weakly: dropping the last handle ends it.
        let worker = glommio::spawn_local(run(Rc::downgrade(&inner), woken)).detach();
        *inner.worker.borrow_mut() = Some(worker);
        Ok(Self { inner })
    }

    pub fn topic(&self) -> &str {
        &self.inner.topic
    }

    /// Queues a record; false (and counted in `dropped`) when the queue is full.
    pub fn append(&self, ctx: TraceContext) -> bool {
        let mut queue = self.inner.queue.borrow_mut();
        if queue.len() >= TRACE_QUEUE_CONTEXTS_MAX {
            let dropped = self.inner.dropped.get() + 1;
            self.inner.dropped.set(dropped);
            if dropped.is_power_of_two() {
                tracing::warn!(topic = %self.inner.topic, dropped, max = TRACE_QUEUE_CONTEXTS_MAX, "trace queue full; trace records dropped");
            }
            return false;
        }
        queue.push_back(Queued { at: Instant::now(), ctx });
        drop(queue);
        let _ = self.inner.wake.try_send(());
        true
    }

    /// A new request id (a unique message id, as Java's).
    pub fn next_request_id(&self) -> String {
        self.inner.ids.next()
    }

    /// Records dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.get()
    }

    /// Trace messages sent, and those whose send failed.
    pub fn sent_and_failed(&self) -> (u64, u64) {
        (self.inner.sent_messages.get(), self.inner.failed_messages.get())
    }

    /// Sends every queued record now and waits until no trace send is in flight.
    pub async fn flush(&self) {
        loop {
            let batch = self.inner.take_batch();
            if batch.is_empty() {
                break;
            }
            self.inner.send_batch(batch).await;
        }
        // The worker may hold a batch it took before: its permit ends with its send.
        let _idle = self.inner.sending.acquire_permit(1).await;
    }

    /// Flushes, stops the worker and the inner producer (Java's `shutdown`).
    pub async fn shutdown(&self) {
        self.flush().await;
        if let Some(w) = self.inner.worker.borrow_mut().take() {
            w.cancel();
        }
        // The instance, not `Producer::shutdown`: that one would shut this dispatcher
        // down again (and the two futures would contain each other).
        self.inner.producer.instance().shutdown().await;
    }
}

impl Inner {
    fn take_batch(&self) -> Vec<TraceContext> {
        let mut queue = self.queue.borrow_mut();
        let n = queue.len().min(TRACE_BATCH_CONTEXTS_MAX);
        queue.drain(..n).map(|q| q.ctx).collect()
    }

    /// Java's `sendTraceData` + `flushData`: records grouped by traced topic, each group
    /// cut into bodies of about `TRACE_MESSAGE_BYTES_MAX`, one message per body.
    async fn send_batch(&self, batch: Vec<TraceContext>) {
        let Ok(_permit) = self.sending.acquire_permit(1).await else { return };
        for transfers in group_by_topic(batch).into_values() {
            for (keys, body) in bodies(transfers) {
                self.send_one(keys, body).await;
            }
        }
    }

    async fn send_one(&self, keys: BTreeSet<String>, body: String) {
        let msg = match Message::new(self.topic.clone(), body).with_keys(keys.iter().map(String::as_str)) {
            Ok(m) => m,
            Err(e) => {
                self.failed_messages.set(self.failed_messages.get() + 1);
                tracing::warn!(topic = %self.topic, error = %e, "trace message refused locally; dropped");
                return;
            }
        };
        match self.producer.send(msg).await {
            Ok(_) => self.sent_messages.set(self.sent_messages.get() + 1),
            Err(e) => {
                self.failed_messages.set(self.failed_messages.get() + 1);
                tracing::warn!(topic = %self.topic, error = %e, "trace send failed; its records are lost");
            }
        }
    }
}

/// Encoded records by the topic of their first message (Java's grouping key; one
/// trace topic per dispatcher here, as RingMQ has no cloud access channel).
fn group_by_topic(batch: Vec<TraceContext>) -> BTreeMap<String, Vec<TraceTransfer>> {
    let mut groups: BTreeMap<String, Vec<TraceTransfer>> = BTreeMap::new();
    for ctx in batch {
        let Some(first) = ctx.beans.first() else { continue };
        groups.entry(first.topic.clone()).or_default().push(encode(&ctx));
    }
    groups
}

/// Java's `flushData`: bodies of joined records, a body ending once it reaches
/// `TRACE_MESSAGE_BYTES_MAX`, each with the union of its records' keys.
fn bodies(transfers: Vec<TraceTransfer>) -> Vec<(BTreeSet<String>, String)> {
    let mut out = Vec::new();
    let (mut keys, mut body) = (BTreeSet::new(), String::new());
    for t in transfers {
        keys.extend(t.keys);
        body.push_str(&t.data);
        if body.len() >= TRACE_MESSAGE_BYTES_MAX {
            out.push((std::mem::take(&mut keys), std::mem::take(&mut body)));
        }
    }
    if !body.is_empty() {
        out.push((keys, body));
    }
    out
}

/// The worker: sends a batch when it is full or its oldest record is due.
async fn run(inner: Weak<Inner>, woken: LocalReceiver<()>) {
    let interval = Duration::from_millis(TRACE_FLUSH_INTERVAL_MS);
    loop {
        let wait = {
            let Some(me) = inner.upgrade() else { return };
            let queue = me.queue.borrow();
            match queue.front() {
                None => None,
                Some(oldest) if queue.len() < TRACE_BATCH_CONTEXTS_MAX => Some(interval.saturating_sub(oldest.at.elapsed())),
                Some(_) => Some(Duration::ZERO),
            }
        };
        match wait {
            None => {
                if woken.recv().await.is_none() {
                    return; // the dispatcher is gone
                }
            }
            Some(d) if !d.is_zero() => {
                let woke = futures_lite::future::or(async { woken.recv().await.is_some() }, async {
                    glommio::timer::sleep(d).await;
                    true
                })
                .await;
                if !woke {
                    return;
                }
            }
            Some(_) => {
                let Some(me) = inner.upgrade() else { return };
                let batch = me.take_batch();
                me.send_batch(batch).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::encoder::{TraceBean, TraceType};

    fn pub_of(topic: &str, id: &str, keys: &str) -> TraceContext {
        let mut c = TraceContext::new(TraceType::Pub, 1);
        c.beans.push(TraceBean { topic: topic.into(), msg_id: id.into(), keys: keys.into(), ..TraceBean::default() });
        c
    }

    #[test]
    fn batches_group_by_topic_and_cut_bodies() {
        let groups = group_by_topic(vec![pub_of("A", "1", "k"), pub_of("B", "2", ""), pub_of("A", "3", ""), TraceContext::new(TraceType::Pub, 1)]);
        assert_eq!(groups.keys().collect::<Vec<_>>(), ["A", "B"], "a record without a message is left out");
        let a = bodies(groups["A"].clone());
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].0.iter().map(String::as_str).collect::<Vec<_>>(), ["1", "3", "k"]);
        assert_eq!(a[0].1.matches("Pub\u{1}").count(), 2);
        // A body is cut once it reaches the limit: big records make one message each.
        let big = "x".repeat(TRACE_MESSAGE_BYTES_MAX);
        let cut = bodies(vec![encode(&pub_of("A", "1", &big)), encode(&pub_of("A", "2", "")), encode(&pub_of("A", "3", &big))]);
        assert_eq!(cut.iter().map(|(k, _)| k.contains("1") as u8 + 2 * k.contains("2") as u8 + 4 * k.contains("3") as u8).collect::<Vec<_>>(), [1, 6]);
    }
}
