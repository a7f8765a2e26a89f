//! Runs the C tests of the C ABI (compiled by build.rs against the committed header).

use ffi_tests::*;

#[test]
fn c_create_free() {
    run("create_free", ctest_create_free);
}

#[test]
fn c_every_null_argument() {
    run("null_arguments", ctest_null_arguments);
}

#[test]
fn c_status_strings() {
    run("status_strings", ctest_status_strings);
}

#[test]
fn c_version_macros_equal_runtime_version() {
    run("version_macros", ctest_version_macros);
}

#[test]
fn c_f_policy_catalog_query_is_the_librarys_static_string() {
    run("catalog_query", ctest_catalog_query);
}

#[test]
fn c_config_errors_name_the_setting() {
    run("config_errors", ctest_config_errors);
}

#[test]
fn c_config_and_engine_outlive_their_handles() {
    run("lifetimes", ctest_lifetimes);
}

#[test]
fn header_compiles_as_c11_and_cxx() {
    run("header_c11", ctest_header_c11);
    run("header_cxx", ctest_header_cxx);
}

#[test]
fn c_transcript_write_then_read() {
    run(
        "transcript_write_then_read",
        ctest_transcript_write_then_read,
    );
}

#[test]
fn c_session_misuse_gets_statuses() {
    run("session_misuse", ctest_session_misuse);
}

#[test]
fn c_s0_facts_input() {
    run("facts_input", ctest_facts_input);
}

#[test]
fn c_p9_reader_key_build_and_compatibility() {
    run("pool_reader_key", ctest_pool_reader_key);
}

#[test]
fn c_p7_p9_pool_checkout_checkin_reset_flag() {
    run("pool_checkout_checkin", ctest_pool_checkout_checkin);
}

#[test]
fn c_r3_warmup_demand_reserve_publish_cancel() {
    run(
        "pool_warmup_reserve_publish",
        ctest_pool_warmup_reserve_publish,
    );
}

#[test]
fn c_p9_r3_invalidation_and_server_removal() {
    run("pool_invalidation", ctest_pool_invalidation);
}

#[test]
fn c_pool_every_null_argument() {
    run("pool_null_arguments", ctest_pool_null_arguments);
}
