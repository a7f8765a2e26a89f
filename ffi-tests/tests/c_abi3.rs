//! ABI 3's growth rule and the input error contract, from C (compiled by build.rs against the
//! committed header). The same functions run under ASan/UBSan and valgrind in
//! `scripts/test-sanitizers.sh`, where every host buffer is allocated at exactly its claimed size.

use ffi_tests::*;

#[test]
fn c_abi3_a_host_built_for_an_older_action_layout_is_refused_and_never_overrun() {
    run(
        "abi_older_action_layout_is_refused_and_never_overrun",
        ctest_abi_older_action_layout_is_refused_and_never_overrun,
    );
}

#[test]
fn c_abi3_a_host_built_for_a_newer_action_layout_gets_the_members_the_library_knows() {
    run(
        "abi_newer_action_layout_gets_the_known_members",
        ctest_abi_newer_action_layout_gets_the_known_members,
    );
}

#[test]
fn c_abi3_growable_inputs_and_pool_stats_follow_the_host_size() {
    run(
        "abi_growable_inputs_and_pool_stats",
        ctest_abi_growable_inputs_and_pool_stats,
    );
}

#[test]
fn c_recv_client_protocol_error_consumes_all_sends_the_08p01_fatal_then_closes() {
    run(
        "recv_client_protocol_error_consumes_all_and_sends_the_fatal",
        ctest_recv_client_protocol_error_consumes_all_and_sends_the_fatal,
    );
}

#[test]
fn c_recv_client_other_errors_consume_nothing_and_queue_nothing() {
    run(
        "recv_client_other_errors_consume_nothing",
        ctest_recv_client_other_errors_consume_nothing,
    );
}
