//! S-4 hazards that end (an examiner's finding: 0/40 reads offloaded for the rest of a session
//! after a psycopg `cursor('h1', withhold=True)` was closed with `CLOSE "h1"`, and after
//! `LISTEN chx; UNLISTEN chx`): the `WITH HOLD` cursor and `LISTEN` hazards are made of names,
//! and clear once none is left — by the server's rules, measured on PostgreSQL 15 (a `CLOSE`
//! is not undone by a ROLLBACK, a `DECLARE … WITH HOLD` is; `LISTEN`/`UNLISTEN` take effect at
//! COMMIT). Whatever the engine cannot tell keeps the hazard.

mod common;

use common::*;
use polarsplit::Reason;

fn host() -> Host {
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    h
}

/// What the session last told the host about pinning its writer (S-4).
fn pinned(h: &Host) -> bool {
    h.log
        .iter()
        .rev()
        .find_map(|a| match a {
            A::PinWriter(p) => Some(*p),
            _ => None,
        })
        .unwrap_or(false)
}

/// A simple Query the writer answers with `tags` (one CommandComplete each), then `status`
/// (and the capture, when one was sent behind it).
fn run(h: &mut Host, sql: &str, tags: &[&str], status: u8) {
    h.client(&query(sql));
    let sent = h.take_sent(WRITER);
    let mut b = Vec::new();
    for t in tags {
        b.extend(command_complete(t));
    }
    b.extend(rfq(status, Some(0x2000), None));
    if sends_capture(&sent) {
        b.extend(capture(&sent));
    }
    h.backend(WRITER, &b);
    let after = h.take_sent(WRITER);
    if sends_capture(&after) {
        h.backend(WRITER, &capture(&after));
    }
    h.take_client();
}

/// The answer to the capture in `sent`.
fn capture(sent: &[u8]) -> Vec<u8> {
    assert!(sends_capture(sent), "{}", tags(sent));
    capture_answer(&[], None)
}

/// A simple Query the writer refuses (an ErrorResponse), then `status`.
fn fails(h: &mut Host, sql: &str, status: u8) {
    h.client(&query(sql));
    h.take_sent(WRITER);
    let mut b = error("ERROR", "34000", "cursor does not exist", None, None);
    b.extend(rfq(status, Some(0x2000), None));
    h.backend(WRITER, &b);
    h.take_client();
}

/// psycopg's shape (Parse/Bind/Describe/Execute/Sync of the unnamed statement), answered.
fn run_extended(h: &mut Host, sql: &str, tag: &str, status: u8) {
    h.client(&unnamed_batch(sql));
    h.take_sent(WRITER);
    let mut b = msg(b'1', b"");
    b.extend(msg(b'2', b""));
    b.extend(msg(b'n', b""));
    b.extend(command_complete(tag));
    b.extend(rfq(status, Some(0x2000), None));
    h.backend(WRITER, &b);
    h.take_client();
}

/// Whether the session's next read goes to a reader (else it must be the S-4 hazard).
fn read_offloaded(h: &mut Host) -> bool {
    let acts = h.client(&query("SELECT * FROM orders"));
    let d = h.last_decision();
    let on_reader = acts.iter().any(|a| matches!(a, A::Acquire { .. }));
    if !on_reader {
        assert_eq!(d.reason, Reason::SessionHazard, "{d:?}");
    }
    on_reader
}

#[test]
fn s4_a_with_hold_cursor_closed_by_name_ends_its_hazard() {
    // The examiner's psycopg session: DECLARE "h1" … WITH HOLD, FETCH, CLOSE "h1".
    let mut h = host();
    run_extended(
        &mut h,
        "DECLARE \"h1\" CURSOR WITH HOLD FOR SELECT g FROM generate_series(1, 10) g",
        "DECLARE CURSOR",
        b'I',
    );
    assert!(pinned(&h), "an open WITH HOLD cursor pins the writer");
    run_extended(&mut h, "FETCH FORWARD 5 FROM \"h1\"", "FETCH 5", b'I');
    assert!(pinned(&h));
    run_extended(&mut h, "CLOSE \"h1\"", "CLOSE CURSOR", b'I');
    // (The writer stays pinned for the unnamed statement prepared there, E-2.)
    assert!(
        read_offloaded(&mut h),
        "closed: nothing is left on the writer"
    );
    // The same as simple Queries, names folded as the server reads them.
    let mut h = host();
    run(
        &mut h,
        "DECLARE H2 CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'I',
    );
    run(&mut h, "CLOSE h2", &["CLOSE CURSOR"], b'I');
    assert!(!pinned(&h));
    assert!(read_offloaded(&mut h));
}

#[test]
fn s4_a_with_hold_cursor_still_open_keeps_the_hazard() {
    let mut h = host();
    run(
        &mut h,
        "DECLARE \"A\" CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'I',
    );
    run(
        &mut h,
        "DECLARE a CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'I',
    );
    // Unquoted A is the cursor "a": "A" is still open.
    run(&mut h, "CLOSE A", &["CLOSE CURSOR"], b'I');
    assert!(pinned(&h), "\"A\" is still open");
    assert!(!read_offloaded(&mut h));
    h.writer_answers("SELECT 0", b'I', Some(0x2000), None);
    run(&mut h, "CLOSE \"A\"", &["CLOSE CURSOR"], b'I');
    assert!(!pinned(&h));
    assert!(read_offloaded(&mut h));
}

#[test]
fn s4_a_failed_declare_or_close_changes_nothing() {
    let mut h = host();
    fails(
        &mut h,
        "DECLARE h CURSOR WITH HOLD FOR SELECT * FROM missing",
        b'I',
    );
    assert!(!pinned(&h), "a DECLARE that failed opened nothing");
    run(
        &mut h,
        "DECLARE h CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'I',
    );
    fails(&mut h, "CLOSE hh", b'I');
    assert!(pinned(&h), "a CLOSE that failed closed nothing");
    // In a string that failed somewhere, the engine cannot tell: the DECLARE counts, the CLOSE
    // does not.
    let mut h = host();
    fails(
        &mut h,
        "DECLARE h CURSOR WITH HOLD FOR SELECT 1; SELECT 1/0",
        b'I',
    );
    assert!(pinned(&h), "it may have run");
    run(&mut h, "CLOSE h", &["CLOSE CURSOR"], b'I');
    assert!(!pinned(&h));
    run(
        &mut h,
        "DECLARE h CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'I',
    );
    fails(&mut h, "CLOSE h; SELECT 1/0", b'I');
    assert!(pinned(&h), "the CLOSE may have failed");
}

#[test]
fn s4_a_with_hold_cursor_declared_in_a_block_that_rolls_back_is_gone() {
    let mut h = host();
    run(&mut h, "BEGIN", &["BEGIN"], b'T');
    run(
        &mut h,
        "DECLARE h CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'T',
    );
    run(&mut h, "ROLLBACK", &["ROLLBACK"], b'I');
    assert!(!pinned(&h), "the server closed it with its block");
    assert!(read_offloaded(&mut h));
    // One that committed stays open.
    let mut h = host();
    run(
        &mut h,
        "BEGIN; DECLARE h CURSOR WITH HOLD FOR SELECT 1; COMMIT",
        &["BEGIN", "DECLARE CURSOR", "COMMIT"],
        b'I',
    );
    assert!(pinned(&h));
    assert!(!read_offloaded(&mut h));
    // A COMMIT of a block that failed is its ROLLBACK.
    let mut h = host();
    run(&mut h, "BEGIN", &["BEGIN"], b'T');
    run(
        &mut h,
        "DECLARE h CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'T',
    );
    fails(&mut h, "SELECT 1/0", b'E');
    run(&mut h, "COMMIT", &["ROLLBACK"], b'I');
    assert!(!pinned(&h));
    // A ROLLBACK TO SAVEPOINT the engine does not follow: the cursor counts.
    let mut h = host();
    run(&mut h, "BEGIN; SAVEPOINT s", &["BEGIN", "SAVEPOINT"], b'T');
    run(
        &mut h,
        "DECLARE h CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'T',
    );
    run(&mut h, "ROLLBACK TO SAVEPOINT s", &["ROLLBACK"], b'T');
    run(&mut h, "COMMIT", &["COMMIT"], b'I');
    assert!(pinned(&h), "kept on the safe side");
}

#[test]
fn s4_a_cursor_closed_in_a_block_that_rolls_back_stays_closed() {
    // Measured: `BEGIN; CLOSE h; ROLLBACK; FETCH h` fails with "cursor h does not exist".
    let mut h = host();
    run(
        &mut h,
        "DECLARE h CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'I',
    );
    run(&mut h, "BEGIN", &["BEGIN"], b'T');
    run(&mut h, "CLOSE h", &["CLOSE CURSOR"], b'T');
    run(&mut h, "ROLLBACK", &["ROLLBACK"], b'I');
    assert!(!pinned(&h));
    assert!(read_offloaded(&mut h));
}

#[test]
fn s4_close_all_and_discard_all_end_every_cursor_and_discard_temp_none() {
    let mut h = host();
    run(
        &mut h,
        "DECLARE a CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'I',
    );
    run(
        &mut h,
        "DECLARE b CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'I',
    );
    run(&mut h, "DISCARD TEMP", &["DISCARD TEMP"], b'I');
    assert!(pinned(&h), "DISCARD TEMP closes no cursor (measured)");
    run(&mut h, "CLOSE ALL", &["CLOSE CURSOR ALL"], b'I');
    assert!(!pinned(&h));
    run(
        &mut h,
        "DECLARE a CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'I',
    );
    run(&mut h, "LISTEN x", &["LISTEN"], b'I');
    h.client(&query("DISCARD ALL"));
    h.take_sent(WRITER);
    let mut b = command_complete("DISCARD ALL");
    b.extend(rfq(b'I', Some(0x2000), None));
    b.extend(capture_answer(&[], None));
    h.backend(WRITER, &b);
    h.take_client();
    assert!(!pinned(&h));
    assert!(read_offloaded(&mut h));
}

#[test]
fn s4_listen_then_unlisten_of_the_only_channel_ends_its_hazard() {
    let mut h = host();
    run(&mut h, "LISTEN chx", &["LISTEN"], b'I');
    assert!(pinned(&h));
    run(&mut h, "UNLISTEN chx", &["UNLISTEN"], b'I');
    assert!(!pinned(&h), "no channel is left");
    assert!(read_offloaded(&mut h));
    // psycopg's shape.
    let mut h = host();
    run_extended(&mut h, "LISTEN chx", "LISTEN", b'I');
    run_extended(&mut h, "UNLISTEN \"chx\"", "UNLISTEN", b'I');
    assert!(read_offloaded(&mut h));
}

#[test]
fn s4_a_channel_still_listened_on_keeps_the_hazard() {
    let mut h = host();
    run(&mut h, "LISTEN x; LISTEN y", &["LISTEN", "LISTEN"], b'I');
    run(&mut h, "UNLISTEN x", &["UNLISTEN"], b'I');
    assert!(pinned(&h), "y is listened on");
    assert!(!read_offloaded(&mut h));
    h.writer_answers("SELECT 0", b'I', Some(0x2000), None);
    // "Y" is another channel than y (it always succeeds on the server).
    run(&mut h, "UNLISTEN \"Y\"", &["UNLISTEN"], b'I');
    assert!(pinned(&h));
    run(&mut h, "UNLISTEN Y", &["UNLISTEN"], b'I');
    assert!(!pinned(&h));
    // UNLISTEN * ends all.
    let mut h = host();
    run(
        &mut h,
        "LISTEN x; LISTEN \"Y\"",
        &["LISTEN", "LISTEN"],
        b'I',
    );
    run(&mut h, "UNLISTEN *", &["UNLISTEN"], b'I');
    assert!(!pinned(&h));
}

#[test]
fn s4_listen_and_unlisten_in_a_block_take_effect_at_its_commit() {
    // BEGIN; LISTEN x; ROLLBACK: never listened on.
    let mut h = host();
    run(&mut h, "BEGIN", &["BEGIN"], b'T');
    run(&mut h, "LISTEN x", &["LISTEN"], b'T');
    run(&mut h, "ROLLBACK", &["ROLLBACK"], b'I');
    assert!(!pinned(&h));
    assert!(read_offloaded(&mut h));
    // LISTEN x; BEGIN; UNLISTEN x; ROLLBACK: still listened on. Then committed: not.
    let mut h = host();
    run(&mut h, "LISTEN x", &["LISTEN"], b'I');
    run(&mut h, "BEGIN; UNLISTEN x", &["BEGIN", "UNLISTEN"], b'T');
    run(&mut h, "ROLLBACK", &["ROLLBACK"], b'I');
    assert!(pinned(&h), "the ROLLBACK undid the UNLISTEN");
    run(&mut h, "BEGIN; UNLISTEN x", &["BEGIN", "UNLISTEN"], b'T');
    assert!(pinned(&h), "not before its COMMIT");
    run(&mut h, "COMMIT", &["COMMIT"], b'I');
    assert!(!pinned(&h));
    // In order at COMMIT: UNLISTEN *; LISTEN d leaves d.
    let mut h = host();
    run(
        &mut h,
        "BEGIN; UNLISTEN *; LISTEN d; COMMIT",
        &["BEGIN", "UNLISTEN", "LISTEN", "COMMIT"],
        b'I',
    );
    assert!(pinned(&h));
    // LISTEN c; UNLISTEN c in one block leaves nothing.
    let mut h = host();
    run(
        &mut h,
        "BEGIN; LISTEN c; UNLISTEN c; COMMIT",
        &["BEGIN", "LISTEN", "UNLISTEN", "COMMIT"],
        b'I',
    );
    assert!(!pinned(&h));
    // A COMMIT of a failed block rolls back: the UNLISTEN never happened.
    let mut h = host();
    run(&mut h, "LISTEN x", &["LISTEN"], b'I');
    run(&mut h, "BEGIN; UNLISTEN x", &["BEGIN", "UNLISTEN"], b'T');
    fails(&mut h, "SELECT 1/0", b'E');
    run(&mut h, "COMMIT", &["ROLLBACK"], b'I');
    assert!(pinned(&h));
    // A ROLLBACK TO SAVEPOINT the engine does not follow: its UNLISTENs do not count.
    let mut h = host();
    run(&mut h, "LISTEN x", &["LISTEN"], b'I');
    run(
        &mut h,
        "BEGIN; SAVEPOINT s; UNLISTEN x",
        &["BEGIN", "SAVEPOINT", "UNLISTEN"],
        b'T',
    );
    run(
        &mut h,
        "ROLLBACK TO SAVEPOINT s; COMMIT",
        &["ROLLBACK", "COMMIT"],
        b'I',
    );
    assert!(pinned(&h));
}

#[test]
fn s4_an_unlisten_in_a_string_that_failed_does_not_count() {
    let mut h = host();
    run(&mut h, "LISTEN x", &["LISTEN"], b'I');
    // The implicit transaction rolled back: so did the UNLISTEN.
    fails(&mut h, "UNLISTEN x; SELECT 1/0", b'I');
    assert!(pinned(&h));
    // A failed LISTEN alone listened on nothing.
    let mut h = host();
    fails(&mut h, "LISTEN x", b'I');
    assert!(!pinned(&h));
}

#[test]
fn s4_beyond_64_names_the_hazard_stays_until_cleared_whole() {
    let mut h = host();
    for i in 0..65 {
        run(&mut h, &format!("LISTEN c{i}"), &["LISTEN"], b'I');
    }
    for i in 0..65 {
        run(&mut h, &format!("UNLISTEN c{i}"), &["UNLISTEN"], b'I');
    }
    assert!(pinned(&h), "one name was not followed");
    run(&mut h, "UNLISTEN *", &["UNLISTEN"], b'I');
    assert!(!pinned(&h));
    for i in 0..65 {
        let sql = format!("DECLARE h{i} CURSOR WITH HOLD FOR SELECT 1");
        run(&mut h, &sql, &["DECLARE CURSOR"], b'I');
    }
    for i in 0..65 {
        run(&mut h, &format!("CLOSE h{i}"), &["CLOSE CURSOR"], b'I');
    }
    assert!(pinned(&h));
    run(&mut h, "CLOSE ALL", &["CLOSE CURSOR ALL"], b'I');
    assert!(!pinned(&h));
    assert!(read_offloaded(&mut h));
}

#[test]
fn s4_a_statement_the_engine_does_not_classify_clears_nothing() {
    let mut h = host();
    run(&mut h, "LISTEN x", &["LISTEN"], b'I');
    run(
        &mut h,
        "DECLARE h CURSOR WITH HOLD FOR SELECT 1",
        &["DECLARE CURSOR"],
        b'I',
    );
    // Neither is a statement the classifier reads: the hazards stay.
    run(&mut h, "UNLISTEN x y", &["UNLISTEN"], b'I');
    run(&mut h, "CLOSE h h", &["CLOSE CURSOR"], b'I');
    assert!(pinned(&h));
    assert!(!read_offloaded(&mut h));
}
