//! The per-shard storage engine (DESIGN.md §3–4).

pub mod io;
