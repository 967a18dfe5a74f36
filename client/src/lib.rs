//! RingMQ client crate: the RocketMQ wire formats shared by every other crate.
//!
//! Owns: the stored-message layout (`message::stored`), message properties
//! (`message::properties`) and Java-compatible hashing (`hash`). The broker's store
//! encodes records with exactly these functions, so a pull response body is the
//! stored bytes as they are.
//!
//! Invariant: decoders never panic on any input; they return a typed error.

pub mod hash;
pub mod message;
pub mod remoting;
