//! SPEC §7 ("comments, string constants, dollar quotes and quoted identifiers never change the
//! verdict"; a misread statement must not run a session-state function on a reader) under the
//! client-only multibyte encodings (red5): in SJIS, BIG5, GBK, GB18030, UHC and JOHAB the
//! second byte of a character may be a backslash or another ASCII byte that is not an
//! identifier character. The server converts the Query string to UTF-8 before it lexes it; the
//! engine sees the bytes. Measured on PostgreSQL 15 through the example proxy, before this was
//! fixed: under `client_encoding=SJIS`, `SELECT E'ﾃ―', set_config(…) --'` (bytes that are also
//! valid UTF-8: `E'Á\', …`) was classified a plain read and ran set_config on the standby,
//! where later clients of the pooled reader read the placeholder (tests/e2e/test_red5_findings.py).

use std::sync::Arc;

use polarsplit::internals::classify::{
    classify, Classification, Classifier, Effects, FunctionCatalogs, FunctionPolicy, Limits,
    NotSafe, WriteFunctions,
};

/// `SELECT E'<prefix>', <call>, 1 --'`: for the server under the encoding whose character ends
/// `prefix`, a string, the call and a comment; read as UTF-8, one string literal.
fn hidden(prefix: &str, call: &str) -> String {
    format!("SELECT E'{prefix}', {call}, 1 --'")
}

/// UTF-8 texts whose bytes end, in some client-only encoding, with a character whose second
/// byte is the ASCII byte after the non-ASCII one.
const PREFIXES: &[(&str, &str)] = &[
    // c3 81 5c: SJIS "ﾃ" + 0x815C.
    ("SJIS", "Á\\"),
    // e3 81 81 5c: GBK and GB18030 0xE381 + 0x815C.
    ("GBK", "ぁ\\"),
];

fn assert_not_safe_with(c: &Classification, effect: Effects, what: &str) {
    assert!(!c.is_replica_safe(), "{what}: replica-safe");
    assert!(
        c.effects().contains(effect),
        "{what}: effects {:?}",
        c.effects()
    );
    assert!(
        c.effects().contains(Effects::RUNS_CODE),
        "{what}: effects {:?}",
        c.effects()
    );
}

#[test]
fn s7_a_call_a_multibyte_encoding_reveals_is_never_safe() {
    for (enc, prefix) in PREFIXES {
        for (call, effect) in [
            (
                "set_config($$app.t$$, $$x$$, false)",
                Effects::CALLS_SET_CONFIG,
            ),
            ("pg_advisory_lock(7)", Effects::ADVISORY_LOCK),
        ] {
            let sql = hidden(prefix, call);
            let c = classify(&sql, &WriteFunctions::defaults());
            assert_not_safe_with(&c, effect, &format!("{enc}: {sql}"));
        }
    }
}

/// Guard: the shape cache never stands a text a multibyte encoding lexes differently for one it
/// cannot (an `E'…'` literal with a backslash stays in the shape's key, `shape.rs`).
#[test]
fn s7_a_cached_shape_never_answers_for_an_encoding_ambiguous_text() {
    let c = Classifier::with_policy(
        FunctionPolicy::default(),
        1024,
        Limits::DEFAULT,
        Arc::new(FunctionCatalogs::new()),
    );
    for v in ["a", "b", "c", "d"] {
        assert!(c.classify(&format!("SELECT E'{v}'")).is_replica_safe());
    }
    for (enc, prefix) in PREFIXES {
        let sql = hidden(prefix, "set_config($$app.t$$, $$x$$, false)");
        for _ in 0..3 {
            let got = c.classify(&sql);
            assert_not_safe_with(&got, Effects::CALLS_SET_CONFIG, &format!("{enc}: {sql}"));
        }
    }
}

/// Other ASCII bytes that are not identifier characters move token boundaries too: a dollar
/// quote's tag (`$ぁ|$` is a tag to a GBK server, `$ぁ` and `|` to a UTF-8 reading).
#[test]
fn s7_a_dollar_tag_a_multibyte_encoding_reads_differently_is_never_safe() {
    let sql = "SELECT $ぁ|$ ' $ぁ|$, set_config($$a.b$$, $$c$$, false) --'";
    let c = classify(sql, &WriteFunctions::defaults());
    assert!(!c.is_replica_safe(), "{sql}");
    assert!(c.effects().contains(Effects::CALLS_SET_CONFIG), "{sql}");
}

/// What stays replica-safe: non-ASCII text followed by an identifier character, white space,
/// a quote or other punctuation below 0x40 (no client-only encoding has such a second byte).
#[test]
fn s7_ordinary_non_ascii_reads_stay_replica_safe() {
    for sql in [
        "SELECT 'é', 'ü ', \"naïve\" FROM t",
        "SELECT * FROM t WHERE name = '東京' AND city = 'München'",
        "SELECT E'é\\n' , 1",
        "SELECT '{\"名\": \"値\"}'::jsonb",
        "SELECT $$Grüße$$, ARRAY['ß']",
    ] {
        let c = classify(sql, &WriteFunctions::defaults());
        let ambiguous = sql.contains("é\\");
        assert_eq!(c.is_replica_safe(), !ambiguous, "{sql}");
        if ambiguous {
            assert_eq!(c.first().not_safe, NotSafe::Unparseable, "{sql}");
        }
    }
}
