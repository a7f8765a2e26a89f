//! Config builder → immutable shared config → engine.

use std::ffi::c_char;
use std::sync::Arc;

use super::{guard, guard_ptr, str_arg, write_text, PolarsplitStatus};
use super::{POLARSPLIT_ERR_CONFIG, POLARSPLIT_ERR_NULL, POLARSPLIT_OK};
use crate::cluster::Engine;
use crate::config::{Config, ConfigBuilder};

/// A mutable configuration under construction. Created by `polarsplit_config_builder_new`,
/// consumed by `polarsplit_config_builder_build` (or freed by `polarsplit_config_builder_free`).
pub struct PolarsplitConfigBuilder {
    inner: ConfigBuilder,
}

/// An immutable, validated configuration. It may be shared by any number of engines and freed
/// at any time: engines keep their own reference.
pub struct PolarsplitConfig {
    pub(crate) inner: Arc<Config>,
}

/// The engine: topology, reader positions and counters shared by all sessions of a process.
/// Thread-safe: any thread may use it concurrently. Sessions keep it alive, so it may be freed
/// while sessions still exist.
pub struct PolarsplitEngine {
    pub(crate) inner: Arc<Engine>,
}

/// Creates a configuration builder holding the defaults of SPEC §8. Returns NULL only if the
/// library failed internally.
///
/// # Safety
/// Always safe. Free the result with `polarsplit_config_builder_free` or consume it with
/// `polarsplit_config_builder_build`.
#[no_mangle]
pub extern "C" fn polarsplit_config_builder_new() -> *mut PolarsplitConfigBuilder {
    guard_ptr(|| {
        Box::into_raw(Box::new(PolarsplitConfigBuilder {
            inner: ConfigBuilder::new(),
        }))
    })
}

/// Sets one setting by name from its text form (e.g. `"consistency"`, `"global"`). On
/// `POLARSPLIT_ERR_CONFIG` the reason, naming the setting, is written to `err` (NUL-terminated,
/// truncated to `err_len`); `err` may be NULL.
///
/// # Safety
/// `builder` must be a live builder; `name` and `value` NUL-terminated strings; `err` NULL or
/// `err_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_config_builder_set(
    builder: *mut PolarsplitConfigBuilder,
    name: *const c_char,
    value: *const c_char,
    err: *mut c_char,
    err_len: usize,
) -> PolarsplitStatus {
    guard(|| {
        if builder.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        // SAFETY: the caller passes NUL-terminated strings or NULL.
        let (name, value) = match unsafe { (str_arg(name), str_arg(value)) } {
            (Ok(n), Ok(v)) => (n, v),
            (Err(s), _) | (_, Err(s)) => return s,
        };
        // SAFETY: non-NULL and, by contract, a live builder used by one thread.
        let b = unsafe { &mut *builder };
        match b.inner.set(name, value) {
            Ok(_) => POLARSPLIT_OK,
            Err(e) => {
                // SAFETY: `err` is NULL or `err_len` writable bytes.
                unsafe { write_text(err, err_len, &e.to_string()) };
                POLARSPLIT_ERR_CONFIG
            }
        }
    })
}

/// Validates the builder and, on success, stores a new configuration in `*out`. The builder is
/// consumed in every case (also on failure and on NULL `out`): do not use or free it afterwards.
/// On `POLARSPLIT_ERR_CONFIG`, `*out` is set to NULL and the reason is written to `err`.
///
/// # Safety
/// `builder` must be NULL or a live builder; `out` a writable pointer slot; `err` NULL or
/// `err_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_config_builder_build(
    builder: *mut PolarsplitConfigBuilder,
    out: *mut *mut PolarsplitConfig,
    err: *mut c_char,
    err_len: usize,
) -> PolarsplitStatus {
    guard(|| {
        if builder.is_null() {
            if !out.is_null() {
                // SAFETY: `out` is a writable slot.
                unsafe { *out = std::ptr::null_mut() };
            }
            return POLARSPLIT_ERR_NULL;
        }
        // SAFETY: a live builder created by `polarsplit_config_builder_new`; ownership moves here.
        let b = unsafe { Box::from_raw(builder) };
        if out.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        match b.inner.build() {
            Ok(c) => {
                let h = Box::new(PolarsplitConfig { inner: Arc::new(c) });
                // SAFETY: `out` is a writable slot.
                unsafe { *out = Box::into_raw(h) };
                POLARSPLIT_OK
            }
            Err(e) => {
                // SAFETY: as above; `err` is NULL or `err_len` writable bytes.
                unsafe {
                    *out = std::ptr::null_mut();
                    write_text(err, err_len, &e.to_string());
                }
                POLARSPLIT_ERR_CONFIG
            }
        }
    })
}

/// Frees a builder that was not built. NULL is a no-op.
///
/// # Safety
/// `builder` must be NULL or a live builder not yet consumed.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_config_builder_free(builder: *mut PolarsplitConfigBuilder) {
    let _ = guard(|| {
        if !builder.is_null() {
            // SAFETY: a live builder; ownership returns to Rust.
            drop(unsafe { Box::from_raw(builder) });
        }
        POLARSPLIT_OK
    });
}

/// Frees a configuration. Engines built from it keep their own reference. NULL is a no-op.
///
/// # Safety
/// `config` must be NULL or a live configuration, freed once.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_config_free(config: *mut PolarsplitConfig) {
    let _ = guard(|| {
        if !config.is_null() {
            // SAFETY: a live configuration; ownership returns to Rust.
            drop(unsafe { Box::from_raw(config) });
        }
        POLARSPLIT_OK
    });
}

/// Creates an engine from a configuration and stores it in `*out`.
///
/// # Safety
/// `config` must be a live configuration; `out` a writable pointer slot.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_new(
    config: *const PolarsplitConfig,
    out: *mut *mut PolarsplitEngine,
) -> PolarsplitStatus {
    guard(|| {
        if out.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        // SAFETY: `out` is a writable slot.
        unsafe { *out = std::ptr::null_mut() };
        if config.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        // SAFETY: a live configuration (shared, read-only).
        let c = unsafe { &*config };
        let engine = Engine::new((*c.inner).clone());
        // SAFETY: `out` is a writable slot.
        unsafe { *out = Box::into_raw(Box::new(PolarsplitEngine { inner: engine })) };
        POLARSPLIT_OK
    })
}

/// Releases the host's reference to an engine. Sessions created from it stay valid. NULL is a
/// no-op.
///
/// # Safety
/// `engine` must be NULL or a live engine handle, freed once.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_free(engine: *mut PolarsplitEngine) {
    let _ = guard(|| {
        if !engine.is_null() {
            // SAFETY: a live engine handle; ownership returns to Rust.
            drop(unsafe { Box::from_raw(engine) });
        }
        POLARSPLIT_OK
    });
}
