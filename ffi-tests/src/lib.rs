//! C tests of the polarsplit C ABI. The C sources in `c/` are compiled by `build.rs` against the
//! committed header and linked with the library; `tests/` runs them.
//!
//! Each C test returns 0 on success, or the source line of the first failed check (and prints
//! what failed to stderr).

use std::ffi::c_int;

// Keep the library (and its exported symbols) linked into every test binary.
use polarsplit as _;

extern "C" {
    pub fn ctest_create_free() -> c_int;
    pub fn ctest_null_arguments() -> c_int;
    pub fn ctest_status_strings() -> c_int;
    pub fn ctest_version_macros() -> c_int;
    pub fn ctest_catalog_query() -> c_int;
    pub fn ctest_config_errors() -> c_int;
    pub fn ctest_lifetimes() -> c_int;
    pub fn ctest_header_c11() -> c_int;
    pub fn ctest_transcript_write_then_read() -> c_int;
    pub fn ctest_session_misuse() -> c_int;
    pub fn ctest_facts_input() -> c_int;
    pub fn ctest_pool_reader_key() -> c_int;
    pub fn ctest_pool_checkout_checkin() -> c_int;
    pub fn ctest_pool_warmup_reserve_publish() -> c_int;
    pub fn ctest_pool_invalidation() -> c_int;
    pub fn ctest_pool_null_arguments() -> c_int;
    pub fn ctest_header_cxx() -> c_int;
    pub fn ctest_misuse_null_every_pointer() -> c_int;
    pub fn ctest_misuse_out_of_range_integers() -> c_int;
    pub fn ctest_misuse_input_while_actions_pending() -> c_int;
    pub fn ctest_misuse_handles_freed_while_in_use() -> c_int;
    pub fn ctest_misuse_output_buffers() -> c_int;
    pub fn ctest_misuse_panic_poisons_one_session() -> c_int;
    pub fn ctest_misuse_facts_and_pool() -> c_int;
    pub fn ctest_abi_older_action_layout_is_refused_and_never_overrun() -> c_int;
    pub fn ctest_abi_newer_action_layout_gets_the_known_members() -> c_int;
    pub fn ctest_abi_growable_inputs_and_pool_stats() -> c_int;
    pub fn ctest_recv_client_protocol_error_consumes_all_and_sends_the_fatal() -> c_int;
    pub fn ctest_recv_client_other_errors_consume_nothing() -> c_int;
    pub fn ctest_r1b_deadline_after_a_reader_statement_and_timeout_retries_on_the_writer() -> c_int;
    pub fn ctest_f1_cancel_forwarded_to_a_reader_closes_it_instead_of_pooling() -> c_int;
    pub fn ctest_f1_cancel_unplaced_answers_57014_and_closes_the_late_connection() -> c_int;
    pub fn ctest_e2_connection_closed_forgets_what_the_connection_had_prepared() -> c_int;
    pub fn ctest_c1_writer_identity_names_the_token_history_and_bumps_the_generation() -> c_int;
    pub fn ctest_host_duties_misuse() -> c_int;
    pub fn ctest_r1b_reader_failures_back_off_then_hold_out_until_a_later_sample() -> c_int;
    pub fn ctest_r1b_session_reader_connect_failed_counts_and_reader_unavailable_does_not() -> c_int;
    pub fn ctest_r1a_fault_reports_clear_the_known_position_until_a_later_sample() -> c_int;
    pub fn ctest_s9_prometheus_text_with_size_query_and_truncation() -> c_int;
    pub fn ctest_f_policy_function_catalogue_routes_user_function_reads_per_database() -> c_int;
    pub fn ctest_host_faults_and_catalogue_misuse() -> c_int;
    pub fn ctest_s7_sequence_catalogue_keeps_sequence_reads_on_the_writer_per_database() -> c_int;
    pub fn ctest_s7_sequence_catalogue_misuse() -> c_int;
    pub fn ctest_s6_object_catalogue_judges_hidden_code_per_database() -> c_int;
    pub fn ctest_s6_object_catalogue_misuse() -> c_int;
}

/// Runs one C test and panics with its failing line.
pub fn run(name: &str, f: unsafe extern "C" fn() -> c_int) {
    // SAFETY: the C tests take no arguments and only call the library's documented API.
    let line = unsafe { f() };
    assert_eq!(line, 0, "C test {name} failed at line {line} (see stderr)");
}
