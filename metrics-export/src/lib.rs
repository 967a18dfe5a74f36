//! The Prometheus export both RingMQ processes share (broker and NameServer): the
//! `GET /metrics` HTTP endpoint on its own OS thread (`http`), the one-writer slot a
//! server publishes its snapshot into without waiting (`slot`), and the metric families
//! their renderers register (`family`: latency buckets, values and histograms taken from
//! snapshots).
//!
//! Invariant: nothing here is called on a request path except `Slot::publish` and
//! `Buckets::observe`, and neither blocks: the exporter thread renders, the servers only
//! count and publish.

pub mod family;
pub mod http;
pub mod slot;

pub use family::{encode, Buckets, Histograms, Labels, Values, LATENCY_BOUNDS_US};
pub use http::{spawn, BasicAuth, BasicAuthError, Exporter};
/// The exposition crate, for renderers (`Registry`, `MetricType`).
pub use prometheus_client;
pub use slot::Slot;
