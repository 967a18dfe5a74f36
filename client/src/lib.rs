//! RingMQ client crate: the RocketMQ wire formats shared by every other crate, and the
//! producer and consumers applications use.
//!
//! Owns: the stored-message layout (`message::stored`), message properties
//! (`message::properties`), Java-compatible hashing (`hash`), the remoting codec
//! (`remoting`), and the client runtime: connections (`net`), the per-thread client
//! instance with routes and heartbeats (`instance`), message ids (`msgid`), the
//! producer (`producer`), request-reply (`request`), the transactional producer
//! (`transaction`), the pull and push consumers (`consumer`) and their message traces
//! (`trace`).
//!
//! The runtime is thread-per-core like the broker: a client lives on one glommio
//! executor (`Rc`, `!Send`); run one per core for more throughput.
//!
//! Invariant: decoders never panic on any input; they return a typed error.

pub mod admin;
pub mod consumer;
pub mod error;
pub mod hash;
pub mod instance;
pub mod message;
pub mod msgid;
pub mod net;
pub mod producer;
pub mod remoting;
pub mod trace;
pub mod request;
pub mod transaction;

pub use error::ClientError;
pub use instance::{ClientConfig, ClientInstance};
pub use message::{Message, MessageExt};
pub use transaction::{LocalTransactionState, TransactionListener, TransactionProducer, TransactionSendResult};
