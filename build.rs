//! Sets the SONAME and the ABI version; with feature `generate-header`, regenerates
//! `include/polarsplit.h` (never in ordinary builds: they must not write into the source tree).

#[path = "build/abi.rs"]
#[allow(dead_code)] // version_macros is only used with feature generate-header
mod abi;
#[cfg(feature = "generate-header")]
#[path = "build/header.rs"]
mod header;
#[cfg(feature = "generate-header")]
#[path = "build/reasons.rs"]
mod reasons;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let manifest = std::fs::read_to_string(std::path::Path::new(&dir).join("Cargo.toml"))
        .expect("read Cargo.toml");
    let abi = abi::abi_version_from_manifest(&manifest);
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-changed=build");
    println!("cargo:rustc-env=POLARSPLIT_ABI_VERSION={abi}");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libpolarsplit.so.{abi}");
    }
    #[cfg(feature = "generate-header")]
    {
        println!("cargo:rerun-if-changed=src");
        println!("cargo:rerun-if-changed=cbindgen.toml");
        let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets CARGO_PKG_VERSION");
        let scratch = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
        let text = header::generate(
            std::path::Path::new(&dir),
            &version,
            abi,
            std::path::Path::new(&scratch),
        )
        .unwrap_or_else(|e| panic!("header generation failed: {e}"));
        let path = std::path::Path::new(&dir).join("include/polarsplit.h");
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&path, text).expect("write include/polarsplit.h");
        }
    }
}
