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
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const IN_FLIGHT_PER_QUEUE_MAX: usize = 1 << 20;

/// Delivered-but-unacknowledged offsets of one queue and its next pull offset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueProgress {
    in_flight: BTreeSet<i64>,
    next_pull_offset: i64,
}

impl QueueProgress {
    pub fn new(next_pull_offset: i64) -> Self {
        Self { in_flight: BTreeSet::new(), next_pull_offset }
    }

    /// Messages at `offsets` were handed to the listener; the next pull starts at
    /// `next_pull_offset`.
    pub fn delivered(&mut self, offsets: impl IntoIterator<Item = i64>, next_pull_offset: i64) {
        self.in_flight.extend(offsets);
        assert!(self.in_flight.len() <= IN_FLIGHT_PER_QUEUE_MAX, "flow control must bound in-flight messages");
        self.next_pull_offset = next_pull_offset;
    }

    /// The listener is done with `offset` (consumed, or handed elsewhere).
    pub fn acked(&mut self, offset: i64) {
        self.in_flight.remove(&offset);
    }

    pub fn set_next_pull_offset(&mut self, offset: i64) {
        self.next_pull_offset = offset;
    }

    pub fn next_pull_offset(&self) -> i64 {
        self.next_pull_offset
    }

    pub fn in_flight_count(&self) -> usize {
        self.in_flight.len()
    }

    pub fn commit_point(&self) -> i64 {
        self.in_flight.first().copied().unwrap_or(self.next_pull_offset)
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
