//! The per-client session state machine.

use std::sync::Arc;

use crate::cluster::Engine;

/// One client's session. Used by one thread at a time; may move between threads.
#[derive(Debug)]
pub struct Session {
    engine: Arc<Engine>,
}

impl Session {
    pub fn new(engine: Arc<Engine>) -> Session {
        Session { engine }
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }
}
