//! The append path: `put` encodes a producer's message straight into the CommitLog's
//! in-memory tail and adds its ConsumeQueue entry and index keys, all under one borrow
//! of `Inner`.
//!
//! Invariants: `put` does no IO and never awaits (durability is `flush.rs`'s); a refused
//! put (`admit`) appends nothing; a record never straddles two segments (each segment
//! ends with a blank of at least `BLANK_LEN_MIN_BYTES`); a record's store time is never
//! 0 and its properties hold no NUL (recovery reads either as a torn write).

use super::*;
use crate::store::config::FlushMode;
use hashbrown::Equivalent;
use ringmq_client::message::stored::{encode_blank, encode_parts, StoredMessage, BLANK_LEN_MIN_BYTES};
use std::net::SocketAddr;

/// A message as handed to the store by a request handler.
#[derive(Debug, Clone)]
pub struct MessageToStore<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub flag: i32,
    pub body: &'a [u8],
    pub properties: &'a str,
    pub sys_flag: i32,
    pub born_timestamp_ms: i64,
    pub born_host: SocketAddr,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutResult {
    pub phys_offset: u64,
    pub queue_offset: u64,
    pub size_bytes: u32,
    pub store_timestamp_ms: i64,
    /// Pass to `wait_durable` (sync flush): the local CommitLog end of the record.
    pub durable_ticket: u64,
}

/// Looks a queue up by borrowed topic: hashes exactly as `(String, i32)` does, so the
/// append path allocates no key.
#[derive(Hash)]
struct QueueRef<'a>(&'a str, i32);

impl Equivalent<QueueKey> for QueueRef<'_> {
    fn equivalent(&self, key: &QueueKey) -> bool {
        self.0 == key.0 && self.1 == key.1
    }
}

impl<D: Disk, C: Clock> Store<D, C> {
    /// Appends a message. No IO: durable after a covering `flush` (see `wait_durable`).
    pub fn put(&self, msg: &MessageToStore<'_>) -> Result<PutResult, StoreError> {
        self.check_alive()?;
        let mut guard = self.inner.borrow_mut();
        let inner = &mut *guard;
        let size = self.admit(inner, msg)?;
        let key = QueueRef(msg.topic, msg.queue_id);
        if !inner.queues.contains_key(&key) {
            let cq = ConsumeQueue::new(
                self.cq_dir(msg.topic, msg.queue_id),
                msg.topic,
                msg.queue_id,
                self.config.cq_entries_per_file,
                self.config.cq_tail_entries,
            );
            inner.queues.insert((msg.topic.to_string(), msg.queue_id), cq);
        }
        // Roll: a record never straddles segments, and every segment ends with a blank
        // record of at least 8 bytes.
        let log = &mut inner.commitlog;
        let seg_end = log.segment_start(log.write_pos) + log.segment_bytes;
        if log.write_pos + size + BLANK_LEN_MIN_BYTES as u64 > seg_end {
            let blank_len = (seg_end - log.write_pos) as usize;
            let mut blank = vec![0u8; blank_len];
            encode_blank(&mut blank);
            log.append(&blank);
        }
        let local = log.write_pos;
        let cq = inner.queues.get_mut(&key).expect("queue inserted above");
        let queue_offset = cq.max_offset();
        // Never 0: recovery reads a zero store time as a torn record.
        let store_timestamp_ms = self.clock.now_ms().max(1);
        let record = StoredMessage {
            queue_id: msg.queue_id,
            flag: msg.flag,
            queue_offset: queue_offset as i64,
            physical_offset: self.shard.phys(local) as i64,
            sys_flag: msg.sys_flag,
            born_timestamp_ms: msg.born_timestamp_ms,
            born_host: msg.born_host,
            store_timestamp_ms,
            store_host: msg.store_host,
            reconsume_times: msg.reconsume_times,
            prepared_transaction_offset: msg.prepared_transaction_offset,
            body: Vec::new(),
            topic: String::new(),
            properties: String::new(),
        };
        // Encoded straight into the tail: the body's one copy on the append path. A
        // record that would straddle two tail chunks (one per MiB at most) goes through
        // the scratch buffer.
        let encode = |mut out: &mut [u8]| encode_parts(&record, msg.body, msg.topic, msg.properties, &mut out);
        if !inner.commitlog.append_in_place(size as usize, encode) {
            inner.scratch.clear();
            encode_parts(&record, msg.body, msg.topic, msg.properties, &mut inner.scratch);
            debug_assert_eq!(inner.scratch.len() as u64, size);
            crate::copy_probe::record(crate::copy_probe::Site::RecordScratch, inner.scratch.len());
            inner.commitlog.append(&inner.scratch);
        }
        crate::copy_probe::record(crate::copy_probe::Site::TailAppend, size as usize);
        let tag_hash = tag_hash_of(msg.properties);
        cq.append(CqEntry { phys_offset: self.shard.phys(local), size: size as u32, tag_hash });
        for k in index_keys(msg.topic, msg.properties) {
            match inner.index.as_mut() {
                Some(index) => index.put_hash(k, self.shard.phys(local), store_timestamp_ms),
                None => inner.index_pending.push((k, self.shard.phys(local), store_timestamp_ms)),
            }
        }
        if local == inner.commitlog_start {
            inner.earliest_record = Some((local, store_timestamp_ms));
        }
        inner.stats.records_put += 1;
        inner.records_appended += 1;
        inner.append_wakers.drain(..).for_each(Waker::wake);
        let wake = match self.config.flush_mode {
            FlushMode::Sync => true,
            FlushMode::Async => inner.commitlog.dirty_bytes() >= self.config.flush_min_bytes,
        };
        if wake {
            if let Some(waker) = inner.flusher_waker.take() {
                waker.wake();
            }
        }
        Ok(PutResult {
            phys_offset: self.shard.phys(local),
            queue_offset,
            size_bytes: size as u32,
            store_timestamp_ms,
            durable_ticket: local + size,
        })
    }

    /// Whether a put may append: its record's encoded size, or why not. Appends nothing
    /// (a checkpoint too far behind also wakes the logics flusher, so it catches up).
    fn admit(&self, inner: &mut Inner<D>, msg: &MessageToStore<'_>) -> Result<u64, StoreError> {
        if let Some((used_percent, refuse_percent)) = inner.disk_full {
            return Err(StoreError::DiskFull { used_percent, refuse_percent });
        }
        if msg.topic.is_empty() || msg.topic.len() > ringmq_client::message::stored::TOPIC_LEN_MAX_BYTES {
            return Err(StoreError::Illegal(format!("topic length {} not in 1..=127", msg.topic.len())));
        }
        if msg.queue_id < 0 {
            return Err(StoreError::Illegal(format!("queue id {} is negative", msg.queue_id)));
        }
        if msg.properties.len() > i16::MAX as usize {
            return Err(StoreError::Illegal(format!("properties are {} bytes (max 32767)", msg.properties.len())));
        }
        if msg.properties.as_bytes().contains(&0) {
            // Recovery reads NUL in properties as a torn write (the body CRC does not
            // cover them).
            return Err(StoreError::Illegal("properties contain a NUL byte".into()));
        }
        let size = ringmq_client::message::stored::encoded_len(
            msg.topic.len(),
            msg.body.len(),
            msg.properties.len(),
            &msg.born_host,
            &msg.store_host,
        ) as u64;
        if size > self.config.record_bytes_limit() {
            return Err(StoreError::TooLarge { size_bytes: size, max_bytes: self.config.record_bytes_limit() });
        }
        let dirty = inner.commitlog.dirty_bytes();
        if dirty + size > self.config.dirty_bytes_max {
            return Err(StoreError::Busy { dirty_bytes: dirty, max_bytes: self.config.dirty_bytes_max });
        }
        let lag = inner.commitlog.write_pos.saturating_sub(inner.checkpoint_logics_phys);
        if lag + size > self.config.checkpoint_lag_bytes_max {
            if let Some(w) = inner.logics_waker.take() {
                w.wake();
            }
            return Err(StoreError::CheckpointBusy { lag_bytes: lag, max_bytes: self.config.checkpoint_lag_bytes_max });
        }
        if inner.index.is_none() && inner.index_pending.len() >= INDEX_PENDING_KEYS_MAX {
            return Err(StoreError::IndexBusy { pending_keys: inner.index_pending.len(), max_keys: INDEX_PENDING_KEYS_MAX });
        }
        Ok(size)
    }
}
