//! Misuse of the C ABI (issue 10), from C: every NULL pointer argument, out-of-range integers for
//! every enum-like parameter, inputs while actions are pending, handles freed while still in use,
//! caller buffers, and a forced panic that poisons exactly one session. The same C functions run
//! under AddressSanitizer/UBSan and valgrind in `scripts/test-sanitizers.sh`.

use ffi_tests::*;

#[test]
fn c_misuse_null_for_every_pointer_argument() {
    run("misuse_null_every_pointer", ctest_misuse_null_every_pointer);
}

#[test]
fn c_misuse_out_of_range_integers_for_every_enum_like_parameter() {
    run(
        "misuse_out_of_range_integers",
        ctest_misuse_out_of_range_integers,
    );
}

#[test]
fn c_misuse_input_while_actions_pending_is_refused_and_changes_nothing() {
    run(
        "misuse_input_while_actions_pending",
        ctest_misuse_input_while_actions_pending,
    );
}

#[test]
fn c_misuse_config_and_engine_freed_while_sessions_use_them() {
    run(
        "misuse_handles_freed_while_in_use",
        ctest_misuse_handles_freed_while_in_use,
    );
}

#[test]
fn c_misuse_output_buffers_are_bounded() {
    run("misuse_output_buffers", ctest_misuse_output_buffers);
}

#[test]
fn c_misuse_panic_poisons_exactly_one_session() {
    run(
        "misuse_panic_poisons_one_session",
        ctest_misuse_panic_poisons_one_session,
    );
}

#[test]
fn c_misuse_backend_facts_and_pool_arguments() {
    run("misuse_facts_and_pool", ctest_misuse_facts_and_pool);
}
