//! Consumed offsets: the commit point of one queue (`QueueProgress`) and, for
//! broadcasting consumers, the local offset file (`LocalOffsetFile`). Clustering
//! consumers commit to the broker (`kernel::commit_offset`).
//!
//! Invariants:
//! - the commit point of a queue is the lowest offset delivered and not yet
//!   acknowledged, or the next offset to pull when nothing is in flight: committing it
//!   never skips an unacknowledged message;
//! - the local file is replaced atomically (write a temporary file, fsync, rename), so a
//!   crash leaves either the old or the new table, never a torn one; at most
//!   `IN_FLIGHT_PER_QUEUE_MAX` offsets are tracked per queue (the push consumer stops
//!   pulling a queue at its flow-control bound, far below this).

use crate::error::ClientError;
use crate::remoting::bodies::MessageQueue;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const IN_FLIGHT_PER_QUEUE_MAX: usize = 1 << 20;

/// Delivered-but-unacknowledged offsets of one queue and its next pull offset.
///
/// Delivered offsets arrive in ascending order (one pull after another), so they are
/// kept in a deque in offset order with an acknowledged flag, and the front is dropped
/// while it is acknowledged: delivering and acknowledging a message costs a push and a
/// binary search, not a tree insert and remove with their allocations (a consumer
/// reading a backlog does this a million times a second). An acknowledged offset stays
/// in the deque while an older one is still out; `tracked_count` says how many are
/// held, and the push consumer's flow control bounds it.
#[derive(Debug, Clone, Default)]
pub struct QueueProgress {
    /// Ascending offsets, each with whether it was acknowledged; the front is not.
    tracked: VecDeque<(i64, bool)>,
    /// Entries of `tracked` not acknowledged.
    in_flight: usize,
    next_pull_offset: i64,
}

impl PartialEq for QueueProgress {
    fn eq(&self, other: &Self) -> bool {
        self.next_pull_offset == other.next_pull_offset && self.unacked().eq(other.unacked())
    }
}
impl Eq for QueueProgress {}

impl QueueProgress {
    pub fn new(next_pull_offset: i64) -> Self {
        Self { tracked: VecDeque::new(), in_flight: 0, next_pull_offset }
    }

    fn unacked(&self) -> impl Iterator<Item = i64> + '_ {
        self.tracked.iter().filter(|(_, acked)| !acked).map(|(o, _)| *o)
    }

    /// Messages at `offsets` were handed to the listener; the next pull starts at
    /// `next_pull_offset`.
    pub fn delivered(&mut self, offsets: impl IntoIterator<Item = i64>, next_pull_offset: i64) {
        for o in offsets {
            match self.tracked.back() {
                Some(&(last, _)) if o <= last => match self.tracked.binary_search_by_key(&o, |&(x, _)| x) {
                    // Delivered again while tracked: out again.
                    Ok(i) => {
                        if std::mem::replace(&mut self.tracked[i].1, false) {
                            self.in_flight += 1;
                        }
                    }
                    Err(i) => {
                        self.tracked.insert(i, (o, false));
                        self.in_flight += 1;
                    }
                },
                _ => {
                    self.tracked.push_back((o, false));
                    self.in_flight += 1;
                }
            }
        }
        assert!(self.tracked.len() <= IN_FLIGHT_PER_QUEUE_MAX, "flow control must bound tracked offsets");
        self.next_pull_offset = next_pull_offset;
    }

    /// The listener is done with `offset` (consumed, or handed elsewhere).
    pub fn acked(&mut self, offset: i64) {
        if let Ok(i) = self.tracked.binary_search_by_key(&offset, |&(x, _)| x) {
            if !std::mem::replace(&mut self.tracked[i].1, true) {
                self.in_flight -= 1;
            }
        }
        while self.tracked.front().is_some_and(|&(_, acked)| acked) {
            self.tracked.pop_front();
        }
    }

    pub fn set_next_pull_offset(&mut self, offset: i64) {
        self.next_pull_offset = offset;
    }

    pub fn next_pull_offset(&self) -> i64 {
        self.next_pull_offset
    }

    /// Delivered and not acknowledged.
    pub fn in_flight_count(&self) -> usize {
        self.in_flight
    }

    /// Offsets held: those in flight and the acknowledged ones behind the oldest of them
    /// (Java's `consumeConcurrentlyMaxSpan` bounds the same span).
    pub fn tracked_count(&self) -> usize {
        self.tracked.len()
    }

    pub fn commit_point(&self) -> i64 {
        self.tracked.front().map_or(self.next_pull_offset, |&(o, _)| o)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    topic: String,
    broker_name: String,
    queue_id: i32,
    offset: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileBody {
    offsets: Vec<Entry>,
}

/// A broadcasting consumer's offsets in `<dir>/<group>/<instance>.json`.
#[derive(Debug)]
pub struct LocalOffsetFile {
    path: PathBuf,
    offsets: BTreeMap<MessageQueue, i64>,
}

fn store_err(path: &Path, reason: impl std::fmt::Display) -> ClientError {
    ClientError::OffsetStore { path: path.display().to_string(), reason: reason.to_string() }
}

impl LocalOffsetFile {
    /// Loads the file; a missing file is an empty table, a corrupt one an error (the
    /// operator decides: delete it to start over from the consume-from policy).
    pub fn open(path: PathBuf) -> Result<Self, ClientError> {
        let offsets = match std::fs::read(&path) {
            Ok(bytes) => {
                let body: FileBody = serde_json::from_slice(&bytes).map_err(|e| store_err(&path, format!("corrupt offset file: {e}")))?;
                body.offsets
                    .into_iter()
                    .map(|e| (MessageQueue { broker_name: e.broker_name, queue_id: e.queue_id, topic: e.topic }, e.offset))
                    .collect()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(store_err(&path, e)),
        };
        Ok(Self { path, offsets })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn get(&self, queue: &MessageQueue) -> Option<i64> {
        self.offsets.get(queue).copied()
    }

    pub fn set(&mut self, queue: &MessageQueue, offset: i64) {
        self.offsets.insert(queue.clone(), offset);
    }

    /// Writes the table atomically.
    pub fn save(&self) -> Result<(), ClientError> {
        let body = FileBody {
            offsets: self
                .offsets
                .iter()
                .map(|(q, o)| Entry { topic: q.topic.clone(), broker_name: q.broker_name.clone(), queue_id: q.queue_id, offset: *o })
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&body).map_err(|e| store_err(&self.path, e))?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| store_err(&self.path, e))?;
        }
        let tmp = self.path.with_extension("json.tmp");
        let mut f = std::fs::File::create(&tmp).map_err(|e| store_err(&tmp, e))?;
        f.write_all(&bytes).map_err(|e| store_err(&tmp, e))?;
        f.sync_data().map_err(|e| store_err(&tmp, e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| store_err(&self.path, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// (delivered batches, acks) → expected commit point.
    fn check(delivered: &[(&[i64], i64)], acks: &[i64], expected: i64) {
        let mut p = QueueProgress::new(0);
        for (offsets, next) in delivered {
            p.delivered(offsets.iter().copied(), *next);
        }
        for a in acks {
            p.acked(*a);
        }
        assert_eq!(p.commit_point(), expected, "delivered {delivered:?} acked {acks:?}");
    }

    #[test]
    fn commit_point_never_passes_an_unacknowledged_message() {
        check(&[], &[], 0);
        check(&[(&[0, 1, 2], 3)], &[], 0);
        check(&[(&[0, 1, 2], 3)], &[0], 1);
        check(&[(&[0, 1, 2], 3)], &[1, 2], 0);
        check(&[(&[0, 1, 2], 3)], &[0, 1, 2], 3);
        // Filtered-out messages are never delivered: the gap is skipped.
        check(&[(&[0, 5], 9)], &[0], 5);
        check(&[(&[0, 5], 9), (&[10], 11)], &[0, 5], 10);
        check(&[(&[], 7)], &[], 7);
    }

    proptest::proptest! {
        /// The deque agrees with the ordered set it replaced, whatever the order of
        /// deliveries (re-deliveries and out-of-order ones included) and acks.
        #[test]
        fn agrees_with_an_ordered_set(ops in proptest::collection::vec((proptest::bool::ANY, 0i64..40), 0..200)) {
            let mut p = QueueProgress::new(0);
            let mut model = BTreeSet::new();
            let mut next = 0i64;
            for (deliver, o) in ops {
                if deliver {
                    next = next.max(o + 1);
                    p.delivered([o], next);
                    model.insert(o);
                } else {
                    p.acked(o);
                    model.remove(&o);
                }
                proptest::prop_assert_eq!(p.in_flight_count(), model.len());
                proptest::prop_assert_eq!(p.commit_point(), model.first().copied().unwrap_or(next));
                proptest::prop_assert!(p.tracked_count() >= model.len());
            }
        }
    }

    #[test]
    fn local_file_round_trips_and_refuses_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g").join("i.json");
        let q = MessageQueue { broker_name: "b".into(), queue_id: 3, topic: "t".into() };
        let mut f = LocalOffsetFile::open(path.clone()).unwrap();
        assert_eq!(f.get(&q), None);
        f.set(&q, 42);
        f.save().unwrap();
        assert_eq!(LocalOffsetFile::open(path.clone()).unwrap().get(&q), Some(42));
        std::fs::write(&path, b"{not json").unwrap();
        let err = LocalOffsetFile::open(path.clone()).unwrap_err();
        assert!(err.to_string().contains("corrupt offset file"), "{err}");
    }
}
