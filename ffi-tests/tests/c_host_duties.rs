//! What a host reports besides bytes and events, from C (compiled by build.rs against the
//! committed header): time passing (R-1b), a forwarded cancel (F-1), a pooled connection it
//! closed itself (E-2), the writer's history (C-1/C-3), reader faults it saw and their back-off
//! (R-1a/R-1b), the Prometheus text (§9), the writer's user functions (F-policy), its sequences (S-7) — and the
//! misuse of each new function.
//! The same functions run under ASan/UBSan and valgrind in `scripts/test-sanitizers.sh`.

use ffi_tests::*;

#[test]
fn c_r1b_deadline_after_a_reader_statement_and_timeout_retries_on_the_writer() {
    run(
        "r1b_deadline_after_a_reader_statement_and_timeout_retries_on_the_writer",
        ctest_r1b_deadline_after_a_reader_statement_and_timeout_retries_on_the_writer,
    );
}

#[test]
fn c_f1_cancel_forwarded_to_a_reader_closes_it_instead_of_pooling() {
    run(
        "f1_cancel_forwarded_to_a_reader_closes_it_instead_of_pooling",
        ctest_f1_cancel_forwarded_to_a_reader_closes_it_instead_of_pooling,
    );
}

#[test]
fn c_f1_cancel_unplaced_answers_57014_and_closes_the_late_connection() {
    run(
        "f1_cancel_unplaced_answers_57014_and_closes_the_late_connection",
        ctest_f1_cancel_unplaced_answers_57014_and_closes_the_late_connection,
    );
}

#[test]
fn c_e2_connection_closed_forgets_what_the_connection_had_prepared() {
    run(
        "e2_connection_closed_forgets_what_the_connection_had_prepared",
        ctest_e2_connection_closed_forgets_what_the_connection_had_prepared,
    );
}

#[test]
fn c_c1_writer_identity_names_the_token_history_and_bumps_the_generation() {
    run(
        "c1_writer_identity_names_the_token_history_and_bumps_the_generation",
        ctest_c1_writer_identity_names_the_token_history_and_bumps_the_generation,
    );
}

#[test]
fn c_host_duties_misuse_nulls_wrong_states_and_panics() {
    run("host_duties_misuse", ctest_host_duties_misuse);
}

#[test]
fn c_r1b_reader_failures_back_off_then_hold_out_until_a_later_sample() {
    run(
        "r1b_reader_failures_back_off_then_hold_out_until_a_later_sample",
        ctest_r1b_reader_failures_back_off_then_hold_out_until_a_later_sample,
    );
}

#[test]
fn c_r1b_session_reader_connect_failed_counts_and_reader_unavailable_does_not() {
    run(
        "r1b_session_reader_connect_failed_counts_and_reader_unavailable_does_not",
        ctest_r1b_session_reader_connect_failed_counts_and_reader_unavailable_does_not,
    );
}

#[test]
fn c_r1a_fault_reports_clear_the_known_position_until_a_later_sample() {
    run(
        "r1a_fault_reports_clear_the_known_position_until_a_later_sample",
        ctest_r1a_fault_reports_clear_the_known_position_until_a_later_sample,
    );
}

#[test]
fn c_s9_prometheus_text_with_size_query_and_truncation() {
    run(
        "s9_prometheus_text_with_size_query_and_truncation",
        ctest_s9_prometheus_text_with_size_query_and_truncation,
    );
}

#[test]
fn c_f_policy_function_catalogue_routes_user_function_reads_per_database() {
    run(
        "f_policy_function_catalogue_routes_user_function_reads_per_database",
        ctest_f_policy_function_catalogue_routes_user_function_reads_per_database,
    );
}

#[test]
fn c_host_faults_and_catalogue_misuse() {
    run(
        "host_faults_and_catalogue_misuse",
        ctest_host_faults_and_catalogue_misuse,
    );
}

#[test]
fn c_s7_sequence_catalogue_keeps_sequence_reads_on_the_writer_per_database() {
    run(
        "s7_sequence_catalogue_keeps_sequence_reads_on_the_writer_per_database",
        ctest_s7_sequence_catalogue_keeps_sequence_reads_on_the_writer_per_database,
    );
}

#[test]
fn c_s7_sequence_catalogue_misuse() {
    run(
        "s7_sequence_catalogue_misuse",
        ctest_s7_sequence_catalogue_misuse,
    );
}

#[test]
fn c_s6_object_catalogue_judges_hidden_code_per_database() {
    run(
        "s6_object_catalogue_judges_hidden_code_per_database",
        ctest_s6_object_catalogue_judges_hidden_code_per_database,
    );
}

#[test]
fn c_s6_object_catalogue_misuse() {
    run(
        "s6_object_catalogue_misuse",
        ctest_s6_object_catalogue_misuse,
    );
}
