//! SPEC S-7 for sequences through the public API: "A read returns what the primary would return."
//! A standby holds a sequence WAL-logged ahead of the primary, so a read naming a sequence the host
//! reported for the session's database (`Engine::set_sequence_catalog`) is not replica-safe —
//! wherever the name stands, in any schema, spelled as the server would resolve it — while the
//! same text in another database, or before the report, is judged without it. Verdicts are cached
//! by text and by shape; the report applies at the next statement whatever the caches hold.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use polarsplit::internals::classify::NotSafe;
use polarsplit::{CatalogError, ConfigBuilder, Engine, UserFunction, UserSequence, Volatility};

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCS.with(|c| c.get());
    let out = f();
    (out, ALLOCS.with(|c| c.get()) - before)
}

fn seq(schema: &str, name: &str) -> UserSequence {
    UserSequence {
        schema: schema.into(),
        name: name.into(),
    }
}

fn engine() -> std::sync::Arc<Engine> {
    Engine::new(ConfigBuilder::new().build().unwrap())
}

/// The first statement's reason in `db` (`NotSafe::None`: replica-safe).
fn why(e: &Engine, db: &[u8], sql: &str) -> NotSafe {
    e.classifier().classify_in(db, sql).first().not_safe
}

/// Every place and spelling a read can name sequence `public.order_seq` (or `app."Mixed Seq"`)
/// by, and what must stay replica-safe.
#[test]
fn s7_a_read_naming_a_reported_sequence_is_not_replica_safe() {
    let e = engine();
    e.set_sequence_catalog(
        b"app",
        [seq("public", "order_seq"), seq("app", "Mixed Seq")],
    )
    .unwrap();
    for sql in [
        "SELECT last_value, log_cnt, is_called FROM order_seq",
        "SELECT last_value FROM public.order_seq",
        "SELECT last_value FROM other_schema.order_seq",
        "select last_value from ORDER_SEQ",
        "SELECT last_value FROM Order_Seq",
        "SELECT last_value FROM \"order_seq\"",
        "SELECT last_value FROM \"public\".\"order_seq\"",
        "SELECT last_value FROM U&\"order\\005Fseq\"",
        "SELECT * FROM \"Mixed Seq\"",
        "SELECT * FROM app.\"Mixed Seq\"",
        "SELECT t.a, s.last_value FROM t JOIN order_seq s ON true",
        "SELECT t.a FROM t, LATERAL (SELECT last_value FROM order_seq) s",
        "SELECT a FROM t WHERE a < (SELECT last_value FROM order_seq)",
        "SELECT * FROM (SELECT * FROM order_seq) AS sub",
        "WITH w AS (SELECT last_value FROM order_seq) SELECT * FROM w",
        "TABLE order_seq",
        "SELECT * FROM ONLY order_seq",
        "(SELECT last_value FROM order_seq)",
        "SELECT 1 UNION ALL SELECT last_value FROM order_seq",
    ] {
        assert_eq!(why(&e, b"app", sql), NotSafe::ServerDependent, "{sql}");
    }
    // Not the sequence: an unquoted name folds, a quoted one does not; a longer or shorter name,
    // a string literal, a comment.
    for sql in [
        "SELECT last_value FROM \"ORDER_SEQ\"",
        "SELECT * FROM mixed_seq",
        "SELECT * FROM \"mixed seq\"",
        "SELECT * FROM order_seq2",
        "SELECT * FROM order_se",
        "SELECT 'order_seq' FROM t",
        "SELECT a FROM t -- order_seq",
        "SELECT a /* order_seq */ FROM t",
        "SELECT nextval FROM t",
    ] {
        assert_eq!(why(&e, b"app", sql), NotSafe::None, "{sql}");
    }
    // Writes are the primary's anyway; the read's reason stays what it was.
    let c = e
        .classifier()
        .classify_in(b"app", "INSERT INTO t SELECT last_value FROM order_seq");
    assert!(!c.is_replica_safe());
    assert_eq!(
        why(&e, b"app", "SELECT * FROM order_seq FOR UPDATE"),
        NotSafe::LockingClause
    );
}

/// Identifiers are truncated to 63 bytes by the server; the names are matched the same way.
#[test]
fn s7_a_long_sequence_name_matches_as_the_server_truncates_it() {
    let e = engine();
    let stored = "s".repeat(63);
    e.set_sequence_catalog(b"app", [seq("public", &stored)])
        .unwrap();
    let typed = "s".repeat(70);
    assert_eq!(
        why(&e, b"app", &format!("SELECT * FROM {typed}")),
        NotSafe::ServerDependent
    );
    assert_eq!(
        why(&e, b"app", &format!("SELECT * FROM \"{typed}\"")),
        NotSafe::ServerDependent
    );
}

/// The report is per database: the same text in another database (or with none reported) is
/// judged by that database's catalogue.
#[test]
fn s7_a_sequence_of_another_database_does_not_affect_this_one() {
    let e = engine();
    let sql = "SELECT last_value FROM order_seq";
    e.set_sequence_catalog(b"shop", [seq("public", "order_seq")])
        .unwrap();
    e.set_sequence_catalog(b"app", [seq("public", "other_seq")])
        .unwrap();
    assert_eq!(why(&e, b"shop", sql), NotSafe::ServerDependent);
    assert_eq!(why(&e, b"app", sql), NotSafe::None);
    assert_eq!(why(&e, b"nodb", sql), NotSafe::None);
    assert!(
        e.classify(sql).is_replica_safe(),
        "no database: no catalogue"
    );
}

/// A report replaces the earlier one whole, over cached verdicts (the text cache admits a text
/// on its second sighting, the shape cache a shape on its second).
#[test]
fn s7_a_sequence_report_replaces_the_earlier_one_and_cached_verdicts_follow() {
    let e = engine();
    let cl = e.classifier();
    let sql = "SELECT last_value FROM order_seq";
    // Cached (text and shape) before any report.
    for i in 0..4 {
        assert_eq!(why(&e, b"app", sql), NotSafe::None);
        let shaped = format!("SELECT last_value FROM order_seq WHERE {i} = {i}");
        assert_eq!(why(&e, b"app", &shaped), NotSafe::None);
    }
    e.set_sequence_catalog(b"app", [seq("public", "order_seq")])
        .unwrap();
    assert_eq!(why(&e, b"app", sql), NotSafe::ServerDependent);
    assert_eq!(
        why(&e, b"app", "SELECT last_value FROM order_seq WHERE 9 = 9"),
        NotSafe::ServerDependent,
        "a shape cached before the report"
    );
    // The same classifier (the report reaches it without a rebuild).
    assert!(std::sync::Arc::ptr_eq(&cl, &e.classifier()));
    // Replaced: order_seq is not a sequence any more (dropped), new_seq is.
    e.set_sequence_catalog(b"app", [seq("public", "new_seq")])
        .unwrap();
    assert_eq!(why(&e, b"app", sql), NotSafe::None);
    assert_eq!(
        why(&e, b"app", "SELECT * FROM new_seq"),
        NotSafe::ServerDependent
    );
    // An empty report: none.
    e.set_sequence_catalog(b"app", []).unwrap();
    assert_eq!(why(&e, b"app", "SELECT * FROM new_seq"), NotSafe::None);
    e.set_sequence_catalog(b"app", [seq("public", "new_seq")])
        .unwrap();
    assert!(e.remove_sequence_catalog(b"app"));
    assert!(!e.remove_sequence_catalog(b"app"));
    assert_eq!(why(&e, b"app", "SELECT * FROM new_seq"), NotSafe::None);
}

/// The sequences and the user functions of a database are reported, replaced and forgotten
/// independently.
#[test]
fn s7_sequences_and_functions_of_a_database_are_kept_apart() {
    let e = engine();
    let f = |name: &str, v| UserFunction {
        schema: "public".into(),
        name: name.into(),
        volatility: v,
    };
    e.set_sequence_catalog(b"app", [seq("public", "order_seq")])
        .unwrap();
    e.set_function_catalog(b"app", [f("report", Volatility::Stable)])
        .unwrap();
    let seq_read = "SELECT last_value FROM order_seq";
    let fn_read = "SELECT report()";
    assert_eq!(why(&e, b"app", seq_read), NotSafe::ServerDependent);
    assert_eq!(why(&e, b"app", fn_read), NotSafe::None);
    // A new function catalogue keeps the sequences, and the other way round.
    e.set_function_catalog(b"app", [f("report", Volatility::Volatile)])
        .unwrap();
    assert_eq!(why(&e, b"app", seq_read), NotSafe::ServerDependent);
    e.set_sequence_catalog(b"app", [seq("public", "x_seq")])
        .unwrap();
    assert_eq!(why(&e, b"app", fn_read), NotSafe::UserFunction);
    assert_eq!(
        why(&e, b"app", "SELECT * FROM x_seq"),
        NotSafe::ServerDependent
    );
    // Forgetting the functions keeps the sequences.
    assert!(e.remove_function_catalog(b"app"));
    assert!(!e.remove_function_catalog(b"app"));
    assert_eq!(why(&e, b"app", fn_read), NotSafe::UnknownFunction);
    assert_eq!(
        why(&e, b"app", "SELECT * FROM x_seq"),
        NotSafe::ServerDependent
    );
    let cat = e.function_catalog(b"app").unwrap();
    assert_eq!((cat.len(), cat.sequences()), (0, 1));
    assert!(cat.is_sequence("x_seq") && !cat.is_sequence("order_seq"));
    assert!(e.remove_sequence_catalog(b"app"));
    assert!(e.function_catalog(b"app").is_none(), "nothing reported");
}

/// A Query string of several statements: each statement is judged by the names it mentions.
#[test]
fn s7_a_sequence_in_a_multi_statement_string_is_judged_per_statement() {
    let e = engine();
    e.set_sequence_catalog(b"app", [seq("public", "order_seq")])
        .unwrap();
    let c = e.classifier().classify_in(
        b"app",
        "SELECT 1; SELECT last_value FROM order_seq; SELECT 2",
    );
    assert_eq!(c.count(), 3);
    let whys: Vec<NotSafe> = c.statements().iter().map(|s| s.not_safe).collect();
    assert_eq!(
        whys,
        [NotSafe::None, NotSafe::ServerDependent, NotSafe::None]
    );
    let c = e
        .classifier()
        .classify_in(b"app", "SELECT 1 FROM t; SELECT 2 FROM u");
    assert!(c.statements().iter().all(|s| s.not_safe == NotSafe::None));
}

/// More names than a classification keeps inline: all of them are still checked.
#[test]
fn s7_a_sequence_among_many_names_is_found() {
    let e = engine();
    e.set_sequence_catalog(b"app", [seq("public", "order_seq")])
        .unwrap();
    let cols: Vec<String> = (0..40).map(|i| format!("c{i}")).collect();
    let sql = format!("SELECT {} FROM t JOIN order_seq ON true", cols.join(", "));
    assert_eq!(why(&e, b"app", &sql), NotSafe::ServerDependent);
    let sql = format!("SELECT {} FROM t JOIN u ON true", cols.join(", "));
    assert_eq!(why(&e, b"app", &sql), NotSafe::None);
}

/// `/* route=reader */` accepts S-7 answers, as it does for the server-dependent relations.
#[test]
fn s7_the_reader_hint_accepts_a_sequence_read_as_it_does_pg_sequences() {
    let e = engine();
    e.set_sequence_catalog(b"app", [seq("public", "order_seq")])
        .unwrap();
    assert_eq!(
        why(&e, b"app", "/* route=reader */ SELECT * FROM pg_sequences"),
        NotSafe::None
    );
    assert_eq!(
        why(
            &e,
            b"app",
            "/* route=reader */ SELECT last_value FROM order_seq"
        ),
        NotSafe::None
    );
}

/// A report that breaks a bound is refused whole, and the earlier one is kept.
#[test]
fn s7_sequence_catalogue_bounds_are_enforced() {
    let e = engine();
    e.set_sequence_catalog(b"app", [seq("public", "order_seq")])
        .unwrap();
    let long = "x".repeat(64);
    assert!(matches!(
        e.set_sequence_catalog(b"app", [seq("public", &long)]),
        Err(CatalogError::BadSequenceName(_))
    ));
    assert!(matches!(
        e.set_sequence_catalog(b"app", [seq("public", "ok"), seq("public", "")]),
        Err(CatalogError::BadSequenceName(_))
    ));
    let many = (0..=polarsplit::internals::classify::MAX_SEQUENCES_PER_DATABASE)
        .map(|i| seq("public", &format!("s{i}")));
    assert!(matches!(
        e.set_sequence_catalog(b"app", many),
        Err(CatalogError::TooManySequences(_))
    ));
    assert_eq!(
        why(&e, b"app", "SELECT * FROM order_seq"),
        NotSafe::ServerDependent,
        "the earlier report is kept"
    );
}

/// The check costs no allocation: a cached read in a database with sequences it does not name
/// (a read that names one is changed, which copies its verdict, as for a user function).
#[test]
fn s7_checking_a_cached_read_against_the_sequences_does_not_allocate() {
    let e = engine();
    e.set_sequence_catalog(b"app", [seq("public", "order_seq")])
        .unwrap();
    let cl = e.classifier();
    let sql = "SELECT abalance FROM pgbench_accounts WHERE aid = $1";
    for _ in 0..2 {
        cl.classify_in(b"app", sql);
    }
    let (c, n) = allocations(|| cl.classify_in(b"app", sql));
    assert_eq!(n, 0, "{sql:?} allocated");
    assert!(c.is_replica_safe());
    assert_eq!(
        why(&e, b"app", "SELECT last_value FROM order_seq"),
        NotSafe::ServerDependent
    );
}
