//! Transport: one multiplexed remoting connection per broker or NameServer address,
//! owned by the client instance of one thread (glommio executor).

pub mod connection;

pub use connection::{Connection, ServerRequestHandler};
