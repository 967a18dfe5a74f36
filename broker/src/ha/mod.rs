//! Master/slave replication per shard (issue 13; DESIGN.md §5): shard i of a master
//! streams its CommitLog to shard i of each slave, which writes the same bytes at the
//! same physical offsets through its own store (`Store::append_replicated`: records
//! checked as recovery checks them, then dispatched to ConsumeQueues and the index).
//!
//! `proto.rs` is the stream's wire format. Every HELLO carries the slave's last epoch
//! and where it began, every WELCOME the master's epoch, so a later failover (a new
//! master with a higher epoch, slaves truncating to the epoch boundary) needs no format
//! change.

pub mod proto;
