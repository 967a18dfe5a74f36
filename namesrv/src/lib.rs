//! RingMQ NameServer: the route registry brokers register with and clients ask for
//! topic routes (DESIGN.md §5). State is memory only; name servers never talk to each
//! other.
//!
//! Modules (one concern each):
//! - `route`: `RouteInfoManager`, the pure registry (no IO, time injected);
//! - `processor`: request code -> response, against the registry;
//! - `server`: the glommio network loop, connection bounds, the expiry scan and the
//!   metrics publishing;
//! - `metrics`: what the server counts, its snapshot and Prometheus exposition (served
//!   by the shared `metrics-export` endpoint on its own thread);
//! - `config`: `ServerConfig` and the TOML file;
//! - `bodies`: the few wire bodies the shared codec lacks;
//! - `controller`: the embedded controller (`enable_controller_in_namesrv`), its own
//!   thread and port;
//! - `acl`: the plain ACL (`acl_enable`): the rules from `plain_acl.yml`, their reload,
//!   the check of every request before `processor` sees it.
//!
//! Invariant: only `server` does IO (it also starts the metrics endpoint's thread), and
//! `acl`, which reads its file (at start, and when its stamp changed);
//! everything it calls is synchronous and deterministic given `now_ms`.

pub mod acl;
pub mod bodies;
pub mod config;
pub mod controller;
pub mod metrics;
pub mod processor;
pub mod route;
pub mod server;

pub use config::{ConfigError, FileConfig, MetricsExporter, ServerConfig};
pub use route::{BrokerRegistration, ExpiredBroker, RegisterResult, RouteError, RouteInfoManager, RouteLimits};
pub use server::{ServerError, ServerHandle};
