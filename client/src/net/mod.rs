//! Transport: one multiplexed remoting connection per broker or NameServer address,
//! owned by the client instance of one thread (glommio executor), plain or TLS (`tls`:
//! the TLS code the broker and the NameServer share).

pub mod connection;
pub mod tls;

pub use connection::{Connection, ServerRequestHandler};
