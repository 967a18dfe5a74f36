//! openraft's storage conformance suite (`openraft::testing::Suite`) on the in-memory
//! v2 log store and state machine (docs/design/controller.md WP1). The suite drives the
//! stores on its own tokio runtime; they need no executor (no timers, no spawns).

use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use ringmq_controller::raft::mem::{MemLogStore, MemStateMachine};
use ringmq_controller::raft::{ControllerTypes, NodeId};

struct Builder;

impl StoreBuilder<ControllerTypes, MemLogStore, MemStateMachine, ()> for Builder {
    async fn build(&self) -> Result<((), MemLogStore, MemStateMachine), StorageError<NodeId>> {
        Ok(((), MemLogStore::default(), MemStateMachine::default()))
    }
}

#[test]
fn mem_store_passes_openraft_suite() {
    if let Err(e) = Suite::test_all(Builder) {
        panic!("openraft storage suite: {e}");
    }
}
