// Version/ABI facts shared by `build.rs` and the header freshness test.

/// The ABI version from `[package.metadata.polarsplit] abi-version = N` in Cargo.toml.
pub fn abi_version_from_manifest(manifest: &str) -> u32 {
    manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("abi-version"))
        .filter_map(|rest| rest.trim().strip_prefix('='))
        .filter_map(|v| v.trim().parse().ok())
        .next()
        .expect("Cargo.toml must set [package.metadata.polarsplit] abi-version")
}

/// The version and ABI macros placed after the includes.
pub fn version_macros(version: &str, abi: u32) -> String {
    let mut parts = version.split(['.', '-', '+']);
    let mut next = || {
        parts
            .next()
            .and_then(|p| p.parse::<u32>().ok())
            .unwrap_or(0)
    };
    let (major, minor, patch) = (next(), next(), next());
    format!(
        "/* The library version this header was generated for (polarsplit_version() at run time). */\n\
         #define POLARSPLIT_VERSION \"{version}\"\n\
         #define POLARSPLIT_VERSION_MAJOR {major}\n\
         #define POLARSPLIT_VERSION_MINOR {minor}\n\
         #define POLARSPLIT_VERSION_PATCH {patch}\n\
         /* The C ABI: compare with polarsplit_abi_version() at start-up and refuse a mismatch. */\n\
         #define POLARSPLIT_ABI_VERSION {abi}\n"
    )
}
