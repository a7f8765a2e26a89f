//! Configuration: a mutable builder whose `_build` consumes it and yields an immutable,
//! shareable configuration (SPEC §8).

use std::ffi::c_char;
use std::sync::Arc;

use super::handle::Castable;
use super::handle::{boundary, boxed, free, take, text, try_arg, try_mut, try_out, write_text};
use super::status::{PolarsplitStatus, POLARSPLIT_ERR_CONFIG, POLARSPLIT_ERR_NULL, POLARSPLIT_OK};
use crate::config::{Config, ConfigBuilder};

/// A mutable configuration under construction. Created by `polarsplit_config_builder_new`,
/// consumed by `polarsplit_config_builder_build` (or freed by `polarsplit_config_builder_free`).
pub struct PolarsplitConfigBuilder {
    inner: ConfigBuilder,
}

impl Castable for PolarsplitConfigBuilder {}

/// An immutable, validated configuration. It may be shared by any number of engines and pools
/// and freed at any time: they keep their own reference.
pub struct PolarsplitConfig {
    pub(crate) inner: Arc<Config>,
}

impl Castable for PolarsplitConfig {}

/// Creates a configuration builder holding the defaults of SPEC §8. Returns NULL only if the
/// library failed internally.
///
/// # Safety
/// Always safe. Free the result with `polarsplit_config_builder_free` or consume it with
/// `polarsplit_config_builder_build`.
#[no_mangle]
pub extern "C" fn polarsplit_config_builder_new() -> *mut PolarsplitConfigBuilder {
    boundary! {
        boxed(PolarsplitConfigBuilder {
            inner: ConfigBuilder::new(),
        })
    }
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
    boundary! {
        let mut b = try_mut!(builder);
        // SAFETY: NUL-terminated strings.
        let (name, value) = unsafe { (try_arg!(text(name)), try_arg!(text(value))) };
        match b.inner.set(name, value) {
            Ok(_) => POLARSPLIT_OK,
            Err(e) => {
                // SAFETY: `err` is NULL or `err_len` writable bytes.
                unsafe { write_text(err, err_len, &e.to_string()) };
                POLARSPLIT_ERR_CONFIG
            }
        }
    }
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
    boundary! {
        // SAFETY: NULL or a live builder, consumed here whatever happens next.
        let b = unsafe { take(builder) };
        let mut out = try_out!(out);
        out.set(std::ptr::null_mut());
        let Some(b) = b else {
            return POLARSPLIT_ERR_NULL;
        };
        match b.inner.build() {
            Ok(c) => {
                out.set(boxed(PolarsplitConfig { inner: Arc::new(c) }));
                POLARSPLIT_OK
            }
            Err(e) => {
                // SAFETY: `err` is NULL or `err_len` writable bytes.
                unsafe { write_text(err, err_len, &e.to_string()) };
                POLARSPLIT_ERR_CONFIG
            }
        }
    }
}

/// Frees a builder that was not built. NULL is a no-op.
///
/// # Safety
/// `builder` must be NULL or a live builder not yet consumed.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_config_builder_free(builder: *mut PolarsplitConfigBuilder) {
    // SAFETY: as documented.
    boundary! { unsafe { free(builder) } }
}

/// Frees a configuration. Engines and pools built from it keep their own reference. NULL is a
/// no-op.
///
/// # Safety
/// `config` must be NULL or a live configuration, freed once.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_config_free(config: *mut PolarsplitConfig) {
    // SAFETY: as documented.
    boundary! { unsafe { free(config) } }
}
