//! Compiles the C tests against the committed header. Warnings are errors: a header that does not
//! compile cleanly as C11 and as C++ fails the build, and with it the tests.

fn main() {
    let include = "../include";
    println!("cargo:rerun-if-changed=c");
    println!("cargo:rerun-if-changed=../include/polarsplit.h");

    let mut c = cc::Build::new();
    c.include(include)
        .flag("-std=c11")
        .flag("-Wall")
        .flag("-Wextra")
        .flag("-Wpedantic")
        .warnings_into_errors(true)
        // Always optimised: GCC's flow warnings (-Warray-bounds, -Wmaybe-uninitialized) only
        // run at -O2, so a debug build would pass C that a release build refuses.
        .opt_level(2)
        // ffi-tests links the library with its `test-hooks` feature (a forced panic).
        .define("POLARSPLIT_TEST_HOOKS", None);
    for f in [
        "c/abi_basics.c",
        "c/header_c11.c",
        "c/transcript.c",
        "c/pool.c",
        "c/misuse.c",
        "c/abi_growth.c",
        "c/errors.c",
        "c/host_duties.c",
    ] {
        c.file(f);
        println!("cargo:rerun-if-changed={f}");
    }
    c.compile("polarsplit_ctests");

    cc::Build::new()
        .cpp(true)
        .include(include)
        .flag("-std=c++17")
        .flag("-Wall")
        .flag("-Wextra")
        .flag("-Wpedantic")
        .warnings_into_errors(true)
        .opt_level(2)
        .file("c/header_cxx.cpp")
        .compile("polarsplit_ctests_cxx");
}
