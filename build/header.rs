// Header generation shared by `build.rs` (feature `generate-header`) and the freshness test in
// `tests/header_fresh.rs`: both must produce byte-identical output from the same inputs.

/// Generates the header text for the crate at `crate_dir`.
pub fn generate(crate_dir: &std::path::Path, version: &str, abi: u32) -> Result<String, String> {
    let mut config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .map_err(|e| format!("cbindgen.toml: {e}"))?;
    config.after_includes = Some(super::abi::version_macros(version, abi));
    // Only the C ABI module (which pulls in its submodules) is parsed: every other `pub` item
    // of the crate is Rust API, not C API.
    let builder = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/ffi/mod.rs"));
    let bindings = builder.generate().map_err(|e| format!("cbindgen: {e}"))?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).map_err(|e| e.to_string())
}
