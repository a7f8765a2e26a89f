//! Host-side helpers for the simulator's users: the shared frontend builders and the decoder of
//! backend bytes into owned messages (`polarsplit-test-support`, the one set of builders for
//! tests, simulator, fuzz targets and benches). The decoder parses with polarsplit's own
//! parsers, so what it accepts is what the engine accepts.

pub use polarsplit_test_support::decode::{decode_all, Decoder, Fields, Msg};
pub use polarsplit_test_support::fe::*;
