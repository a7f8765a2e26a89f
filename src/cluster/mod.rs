//! Engine-wide state shared by every session of a host process: configuration, topology,
//! generations, reader replay positions and counters.

pub mod readers;

use std::sync::Arc;

use crate::config::Config;

/// The engine: one per host process, shared by all threads.
#[derive(Debug)]
pub struct Engine {
    config: Arc<Config>,
}

impl Engine {
    pub fn new(config: Config) -> Arc<Engine> {
        Arc::new(Engine {
            config: Arc::new(config),
        })
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }
}
