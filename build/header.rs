// Header generation shared by `build.rs` (feature `generate-header`) and the freshness test in
// `tests/header_fresh.rs`: both must produce byte-identical output from the same inputs.

/// Generates the header text for the crate at `crate_dir`. `scratch` is a directory for the
/// generated reason constants (build.rs: OUT_DIR; the test: a temporary directory).
pub fn generate(
    crate_dir: &std::path::Path,
    version: &str,
    abi: u32,
    scratch: &std::path::Path,
) -> Result<String, String> {
    let mut config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .map_err(|e| format!("cbindgen.toml: {e}"))?;
    config.after_includes = Some(super::abi::version_macros(version, abi));
    // The reasons table becomes `POLARSPLIT_REASON_*` constants: cbindgen does not expand the
    // `reasons!` macro, so its rows are read from the source and handed over as Rust constants.
    let decision = std::fs::read_to_string(crate_dir.join("src/decision.rs"))
        .map_err(|e| format!("src/decision.rs: {e}"))?;
    let reasons = super::reasons::rust_constants(&super::reasons::rows(&decision)?);
    std::fs::create_dir_all(scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let reasons_rs = scratch.join("polarsplit_reasons.rs");
    std::fs::write(&reasons_rs, reasons).map_err(|e| format!("{}: {e}", reasons_rs.display()))?;
    // Only the C ABI module (which pulls in its submodules) is parsed: every other `pub` item
    // of the crate is Rust API, not C API.
    let builder = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/ffi/mod.rs"))
        .with_src(&reasons_rs);
    let bindings = builder.generate().map_err(|e| format!("cbindgen: {e}"))?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).map_err(|e| e.to_string())
}
