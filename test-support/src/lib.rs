//! Test support shared by polarsplit's integration tests, the simulator (`sim/`), the fuzz
//! targets (`fuzz/`) and the benchmarks: one set of builders instead of one per folder.
//!
//! - [`fe`] and [`be`]: frontend and backend PostgreSQL v3 messages, byte for byte, with the
//!   PolarDB RFQ extensions (W-2). They depend on nothing in the engine, so a test that checks
//!   the engine's own encoders is not checking them against themselves.
//! - [`decode`]: owned views of byte streams (backend messages as [`decode::Msg`], frontend
//!   streams as tags and Query texts), parsed with the engine's own parsers — what they accept
//!   is what the engine accepts.
//! - [`action`]: [`action::A`], an owned mirror of the engine's borrowed `Action`, for
//!   assertions and logs.
//! - [`host`]: [`host::Host`], a fake host over `polarsplit::Streams` (the byte
//!   contract's reference implementation) that keeps every action; [`lean::Lean`], a host that
//!   keeps counts only, for memory measurements; [`alloc`], a per-thread counting allocator.
//!
//! Everything this crate takes from the engine comes through [`api`].

pub mod action;
pub mod alloc;
pub mod api;
pub mod be;
pub mod decode;
pub mod fe;
pub mod host;
pub mod lean;

/// Whether `hay` contains `needle` (an empty needle is everywhere).
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// An engine configuration built as a host builds one, through `ConfigBuilder` (every setting
/// checked, then the combination): SPEC §8's defaults changed by `settings`, each a
/// `(name, value)` pair in the text form of `ConfigBuilder::set`. Panics, naming the setting,
/// when the builder refuses one.
pub fn config(settings: &[(&str, &str)]) -> api::Config {
    let mut b = polarsplit::ConfigBuilder::new();
    for (name, value) in settings {
        if let Err(e) = b.set(name, value) {
            panic!("test configuration refused: {e}");
        }
    }
    b.build()
        .unwrap_or_else(|e| panic!("test configuration refused: {e}"))
}

/// SPEC §8's default configuration.
pub fn default_config() -> api::Config {
    config(&[])
}
