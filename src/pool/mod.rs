//! Reader connections: the compatibility key (SPEC P-9), and (later) the optional pool index with
//! reserve → handshake → publish warmup.

mod key;

pub use key::{Fnv64, ReaderKey};
