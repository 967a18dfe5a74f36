//! The RocketMQ *remoting* wire codec: frames, commands (JSON and ROCKETMQ binary
//! headers), request/response codes, typed custom headers, JSON bodies and the batch
//! message body.
//!
//! Layout (one concern per file):
//! - `frame`: length-prefixed frames, incremental decoding with limits checked from the
//!   8-byte prefix before anything else is buffered.
//! - `command`: `RemotingCommand` and its two header serializations.
//! - `ext`: `ExtFields`, the custom header fields, spans of the frame they came in.
//! - `codes`: request, response and language codes.
//! - `headers`: typed views over `extFields` (`from_ext` / `to_ext`).
//! - `json`: the lenient JSON reader / legacy JSON writer every body shares.
//! - `heartbeat`, `route`, `bodies`: JSON bodies.
//! - `batch`: the SEND_BATCH_MESSAGE body.
//!
//! Invariants shared by every decoder here: it never panics on any input, it returns a
//! typed error, and it allocates at most a bounded multiple of the bytes it was given
//! (which the frame decoder has already bounded). Decoding is lenient where real clients
//! disagree (DESIGN.md §6, "Client dialects"); encoding is strict.

pub mod acl;
pub mod admin;
pub mod batch;
pub mod bodies;
pub mod codes;
pub mod command;
pub mod controller;
pub mod ext;
pub mod frame;
pub mod ha;
pub mod headers;
pub mod heartbeat;
pub mod json;
pub mod pop;
pub mod route;
mod wire;

pub use batch::{BatchError, BatchMessage};
pub use command::{CommandError, ExtFields, RemotingCommand};
pub use frame::{Frame, FrameError, FrameLimits, SerializeType};
pub use headers::{CommandHeader, HeaderError};
pub use json::BodyError;
