//! The controller embedded in the NameServer process (`enable_controller_in_namesrv`,
//! docs/design/controller.md §4): started before the NameServer listens, on its own
//! glommio executor thread and its own port (the node's peer address), stopped with it.
//!
//! Invariant: nothing is shared with the route registry: the NameServer's "memory only,
//! never talks to other NameServers" holds for routes; the controller has its own peers
//! and disk (`controllerStorePath`).

use ringmq_controller::config::ControllerFileConfig;
use ringmq_controller::server::{self, ControllerHandle, ServerError};

/// Starts the controller node; returns once it listens.
pub fn start(config: &ControllerFileConfig) -> Result<ControllerHandle, Box<ServerError>> {
    let handle = server::spawn(config.node_config()).map_err(Box::new)?;
    tracing::info!(
        controller_addr = %handle.local_addr(),
        node = config.self_id,
        group = config.group,
        "controller running inside the name server (enable_controller_in_namesrv)"
    );
    Ok(handle)
}
