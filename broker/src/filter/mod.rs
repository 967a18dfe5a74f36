//! Message filters a consumer subscribes with, evaluated by the broker over a message's
//! stored properties: today Apache RocketMQ's SQL92 selector (`MessageSelector.bySql`,
//! `sql92`). Pure code: no IO, no clocks, no shared state.
//!
//! Invariants:
//! - Parse cost is bounded by the text bound (`sql92::SQL92_EXPRESSION_BYTES_MAX`):
//!   longer text is refused before it is read, and parsing is linear in the text (plus
//!   sorting IN lists).
//! - Nesting is bounded (`sql92::SQL92_DEPTH_MAX`): deeper text is refused at parse, so
//!   neither parsing nor evaluation can overflow the stack.
//! - Evaluation cost is bounded by the expression size: each node of the compiled
//!   expression is visited at most once per message (times a property lookup, linear
//!   in the properties string).
//! - Nothing here panics on any input, whether expression text or properties.

mod java_number;
pub mod sql92;
