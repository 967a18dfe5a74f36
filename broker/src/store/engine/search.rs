//! Point lookups: a record by physical offset (a view by offsetMsgId, retention's age
//! probe, a key query's hits), store times of queue offsets, the binary search of a
//! queue by time, and the index query by key.
//!
//! Invariants: point reads bypass the read-ahead windows (a probe would pull in a whole
//! window for one record); a record is returned only if its CRC checks and it says it
//! lies where it was looked for; a key query's hits are checked against the record's
//! topic and keys (index hashes collide).

use super::*;
use crate::store::index::IndexError;
use ringmq_client::message::properties::Properties;
use ringmq_client::message::stored::StoredMessageView;

impl<D: Disk, C: Clock> Store<D, C> {
    /// The stored record at `phys`, CRC-checked; `None` if retention deleted it or no
    /// record starts there.
    pub async fn read_record(&self, phys: u64, size: Option<u32>) -> Result<Option<Vec<u8>>, StoreError> {
        if ShardId::of_phys(phys) != self.shard {
            return Ok(None);
        }
        let local = local_of(phys);
        if local < self.commitlog_min() || local >= self.write_offset() {
            return Ok(None);
        }
        let size = match size {
            Some(s) => s as usize,
            None => {
                let head = self.read_commitlog(phys, 4).await?;
                if head.len() < 4 {
                    return Ok(None);
                }
                i32::from_be_bytes([head[0], head[1], head[2], head[3]]).max(0) as usize
            }
        };
        if size as u64 > self.config.record_bytes_limit() {
            return Ok(None);
        }
        let bytes = self.read_commitlog(phys, size).await?;
        match StoredMessageView::parse_verified(&bytes) {
            Ok(view) if view.physical_offset() as u64 == phys => Ok(Some(bytes)),
            Ok(_) => Ok(None),
            Err(e) => Err(StoreError::Corrupt {
                file: self.dir.join("commitlog"),
                offset: phys,
                reason: e.to_string(),
            }),
        }
    }

    async fn store_timestamp_at(&self, entry: &CqEntry) -> Result<Option<i64>, StoreError> {
        Ok(match self.read_record(entry.phys_offset, Some(entry.size)).await? {
            Some(bytes) => StoredMessageView::parse(&bytes).ok().map(|v| v.store_timestamp_ms()),
            None => None,
        })
    }

    /// Store time of the message at `offset` of a queue (Java's
    /// `getMessageStoreTimeStamp`); `None` when that offset holds no readable message.
    pub async fn store_time_at(&self, topic: &str, queue_id: i32, offset: u64) -> Result<Option<i64>, StoreError> {
        if offset < self.min_offset(topic, queue_id) {
            return Ok(None);
        }
        let entries = self.cq_entries(topic, queue_id, offset, 1).await?;
        match entries.first() {
            Some(e) => self.store_timestamp_at(e).await,
            None => Ok(None),
        }
    }

    /// Store time of the oldest readable message of a queue.
    pub async fn earliest_store_time(&self, topic: &str, queue_id: i32) -> Result<Option<i64>, StoreError> {
        let min = self.min_offset(topic, queue_id);
        let entries = self.cq_entries(topic, queue_id, min, 1).await?;
        match entries.first() {
            Some(e) => self.store_timestamp_at(e).await,
            None => Ok(None),
        }
    }

    /// The first queue offset whose message was stored at or after `timestamp_ms`
    /// (the max offset if none), by binary search over store timestamps.
    pub async fn search_offset_by_time(&self, topic: &str, queue_id: i32, timestamp_ms: i64) -> Result<u64, StoreError> {
        let (mut lo, mut hi) = (self.min_offset(topic, queue_id), self.max_offset(topic, queue_id));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let entries = self.cq_entries(topic, queue_id, mid, 1).await?;
            let Some(entry) = entries.first() else { break };
            match self.store_timestamp_at(entry).await? {
                Some(ts) if ts >= timestamp_ms => hi = mid,
                Some(_) => lo = mid + 1,
                None => lo = mid + 1,
            }
        }
        Ok(lo)
    }

    /// Records whose `topic#key` index entry matches, newest first, with the key
    /// checked on the record (index hash collisions are filtered out).
    pub async fn query_by_key(&self, topic: &str, key: &str, max_results: usize, begin_ms: i64, end_ms: i64) -> Result<Vec<Vec<u8>>, StoreError> {
        let index_key = format!("{topic}#{key}");
        let offsets = {
            // Queries read sealed index files from disk; the service is borrowed
            // immutably only for the call.
            let index = self.take_index().await;
            let found = index.query(&index_key, max_results.max(1) * 2, begin_ms, end_ms).await;
            self.return_index(index);
            self.note_read(found.map_err(|e| match e {
                IndexError::Read { file, offset, source } => StoreError::Read { file, offset, source },
                other => StoreError::Index(other),
            }))?
        };
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for phys in offsets {
            if out.len() >= max_results || !seen.insert(phys) {
                continue;
            }
            let Some(bytes) = self.read_record(phys, None).await? else { continue };
            let Ok(view) = StoredMessageView::parse(&bytes) else { continue };
            if view.topic_bytes() != topic.as_bytes() {
                continue;
            }
            let props = Properties::decode_str(&String::from_utf8_lossy(view.properties_bytes()));
            if props.get(keys::UNIQ_KEY) == Some(key) || props.keys().any(|k| k == key) {
                out.push(bytes);
            }
        }
        Ok(out)
    }
}
