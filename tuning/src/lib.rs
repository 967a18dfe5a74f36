//! RingMQ tuning: the broker profiles in `tuning/profiles/` (read by the broker's
//! `config/` module) and the kernel/host profiles in `tuning/kernel/`, with the library
//! behind `ringmq-tune`, which checks a host against a kernel profile and applies it.
//!
//! Flow: [`profile`] parses a kernel profile → [`host`] reads the host's state under a
//! root directory → [`check`] compares them into findings → [`apply`] turns the
//! differing findings into commands and writes; [`uring`] probes the running kernel's
//! io_uring and adds its own findings.
//!
//! Invariant: only [`host`] reads and only [`apply::execute`] writes the host; the
//! other modules are pure, so everything but the io_uring probe is tested on fake
//! trees in temporary directories.

pub mod apply;
#[cfg(test)]
mod fake_root;
pub mod check;
pub mod host;
pub mod profile;
pub mod uring;
