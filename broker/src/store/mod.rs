//! The per-shard storage engine (DESIGN.md §3–4).

pub mod checkpoint;
pub mod config;
pub mod consumequeue;
pub mod engine;
pub mod error;
pub mod flusher;
pub mod index;
pub mod io;
pub mod segmented;
pub mod tail;
