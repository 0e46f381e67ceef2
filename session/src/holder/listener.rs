//! Accepting connections, at most a bounded number at once: every session's clients, plus a
//! few for `list`, `kill` and hellos in progress. Past that, connections wait in the kernel's
//! backlog until one ends (each must say what it wants within 5 s).

use std::sync::Arc;

use tokio::net::UnixListener;
use tokio::sync::Semaphore;

use super::connection;
use super::members::MAX_CLIENTS;
use super::registry::Registry;

/// Connections beyond every session's clients.
const SPARE_CONNECTIONS: usize = 8;

/// The most connections served at once for a holder of `max_sessions`.
pub fn max_connections(max_sessions: usize) -> usize {
    max_sessions * MAX_CLIENTS + SPARE_CONNECTIONS
}

/// Accept and serve connections until dropped.
pub async fn accept(listener: UnixListener, registry: Arc<Registry>, max_connections: usize) {
    let slots = Arc::new(Semaphore::new(max_connections));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        match listener.accept().await {
            Ok((stream, _)) => {
                let registry = registry.clone();
                tokio::spawn(async move {
                    connection::handle(stream, registry).await;
                    drop(slot);
                });
            }
            Err(error) => {
                crate::log::line(&format!("accepting a connection: {error}"));
                // Out of descriptors, typically: let one end before trying again.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}
