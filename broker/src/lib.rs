//! RingMQ broker library: the per-shard store (and, later, shards and request handlers).

pub mod store;
