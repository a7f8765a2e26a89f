//! The committed header is exactly what cbindgen generates from the sources, and the built `.so`
//! carries a SONAME and exports only `polarsplit_*`.

#[path = "../build/abi.rs"]
#[allow(dead_code)]
mod abi;
#[path = "../build/header.rs"]
mod header;
#[path = "../build/reasons.rs"]
mod reasons;

use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn committed_header_is_fresh() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let abi = abi::abi_version_from_manifest(&manifest);
    let scratch = std::env::temp_dir().join(format!("polarsplit-header-{}", std::process::id()));
    let fresh = header::generate(dir, env!("CARGO_PKG_VERSION"), abi, &scratch).unwrap();
    let _ = std::fs::remove_dir_all(&scratch);
    let committed = std::fs::read_to_string(dir.join("include/polarsplit.h")).unwrap();
    assert!(
        fresh == committed,
        "include/polarsplit.h is stale: run `cargo build --features generate-header` and commit it"
    );
}

/// The newest of `target/{release,debug}/<name>`. `cargo test` alone does not link the cdylib
/// and staticlib crate types; the test command runs `cargo build --release` first.
fn built(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe.parent().unwrap().parent().unwrap().parent().unwrap();
    let candidates: Vec<PathBuf> = ["release", "debug"]
        .iter()
        .map(|p| target.join(p).join(name))
        .filter(|p| p.exists())
        .collect();
    candidates
        .into_iter()
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .unwrap_or_else(|| {
            panic!("{name} is not built: run `cargo build --release` (the test command does)")
        })
}

#[test]
fn shared_library_has_soname_and_exports_only_polarsplit_symbols() {
    let so = built("libpolarsplit.so");
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let abi = abi::abi_version_from_manifest(&manifest);

    let dynamic = Command::new("readelf")
        .arg("-d")
        .arg(&so)
        .output()
        .expect("readelf");
    let text = String::from_utf8_lossy(&dynamic.stdout);
    assert!(
        text.contains(&format!("Library soname: [libpolarsplit.so.{abi}]")),
        "no SONAME libpolarsplit.so.{abi}:\n{text}"
    );

    let nm = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&so)
        .output()
        .expect("nm");
    let syms: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .collect();
    assert!(syms.iter().any(|s| s == "polarsplit_version"), "{syms:?}");
    let foreign: Vec<&String> = syms
        .iter()
        .filter(|s| !s.starts_with("polarsplit_"))
        .collect();
    assert!(foreign.is_empty(), "non-polarsplit exports: {foreign:?}");
}

#[test]
fn static_library_is_built() {
    let a = built("libpolarsplit.a");
    let nm = Command::new("nm").arg(&a).output().expect("nm");
    assert!(String::from_utf8_lossy(&nm.stdout).contains("polarsplit_session_poll_action"));
}
