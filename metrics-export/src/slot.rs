//! `Slot`: the latest snapshot one server thread published, read by the exporter.
//!
//! Invariants: `publish` never waits — if the exporter holds the lock (only to clone an
//! `Arc`), that round is skipped and the next publish brings it up to date; a reader sees
//! a whole snapshot or none, never a half-written one.

use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub struct Slot<T> {
    latest: Mutex<Option<Arc<T>>>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self { latest: Mutex::new(None) }
    }
}

impl<T> Slot<T> {
    /// Replaces the snapshot unless the exporter is reading it right now.
    /// Returns whether it was stored.
    pub fn publish(&self, snapshot: T) -> bool {
        match self.latest.try_lock() {
            Ok(mut s) => {
                *s = Some(Arc::new(snapshot));
                true
            }
            Err(_) => false,
        }
    }

    /// The latest snapshot, if any was published. A poisoned lock (a publisher panicked
    /// mid-assignment, which cannot leave a half value) still yields it.
    pub fn latest(&self) -> Option<Arc<T>> {
        match self.latest.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_skips_while_read_and_latest_wins() {
        let slot = Slot::default();
        assert_eq!(slot.latest(), None);
        assert!(slot.publish(1));
        assert!(slot.publish(2));
        assert_eq!(slot.latest().as_deref(), Some(&2));
        let held = slot.latest.lock().unwrap();
        assert!(!slot.publish(3), "a publisher never waits for a reader");
        drop(held);
        assert_eq!(slot.latest().as_deref(), Some(&2));
    }
}
