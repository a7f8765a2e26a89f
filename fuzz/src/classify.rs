//! The statement classifier (SPEC §7) on arbitrary SQL text, including shapes that attack its
//! bounds: nesting far deeper than the limit, far more statements than the limit, texts larger
//! than the limit, unterminated quotes and comments. The input's first byte picks the shape.
//!
//! Invariants:
//! - no panic and no stack overflow (libFuzzer runs with ASan: a recursion would overflow on the
//!   200,000-deep inputs); time is bounded by libFuzzer's `-timeout`;
//! - every statement span lies inside the text, on character boundaries, in order, disjoint;
//! - the decision cache returns what the classifier computes (miss and hit);
//! - trailing whitespace changes no verdict.

use polarsplit::internals::classify::{
    classify, classify_with_limits, Classifier, Limits, WriteFunctions,
};

use super::input::Input;

fn check_spans(sql: &str, c: &polarsplit::internals::classify::Classification) {
    assert!(c.count() >= 1);
    let mut last_end = 0u32;
    for s in c.statements() {
        let (a, b) = (s.span.start as usize, s.span.end as usize);
        if s.span.is_empty() {
            continue;
        }
        assert!(b <= sql.len(), "span {a}..{b} outside {} bytes", sql.len());
        assert!(sql.is_char_boundary(a) && sql.is_char_boundary(b));
        assert!(
            s.span.start >= last_end,
            "spans overlap or are out of order"
        );
        last_end = s.span.end;
    }
}

fn shape(inp: &mut Input<'_>) -> String {
    // Mostly plain text; the expensive shapes one time in four.
    let kind = match inp.u8() % 20 {
        k @ 1..=5 => k,
        _ => 0,
    };
    let n = (inp.u32() % 200_001) as usize;
    let text = String::from_utf8_lossy(inp.rest()).into_owned();
    let part = if text.is_empty() { "1" } else { text.as_str() };
    match kind {
        // Nesting: SELECT ((((…part…)))).
        1 => format!("SELECT {}{part}{}", "(".repeat(n), ")".repeat(n)),
        // Unbalanced nesting: only opening parentheses, or only closing ones.
        2 => format!(
            "SELECT {}{part}",
            if n % 2 == 0 { "(" } else { ")" }.repeat(n)
        ),
        // Many statements.
        3 => {
            let k = n.min(1_500_000 / (part.len() + 1));
            let mut s = String::with_capacity(k * (part.len() + 1));
            for _ in 0..k {
                s.push_str(part);
                s.push(';');
            }
            s
        }
        // Larger than the classifier's text limit.
        4 => {
            let target = (1 << 20) + n;
            part.repeat(target / part.len() + 1)
        }
        // Nested comments and dollar quotes that never close.
        5 => format!(
            "SELECT {}{part}",
            ["/*", "$a$", "'", "\"", "E'\\"][n % 5].repeat(n % 50_000)
        ),
        _ => text,
    }
}

pub fn run(data: &[u8]) {
    let mut inp = Input::new(data);
    let sql = shape(&mut inp);
    let wf = WriteFunctions::defaults();

    let c = classify(&sql, &wf);
    check_spans(&sql, &c);

    // The cache (miss, then hit) agrees with the classifier (it skips texts over 16 KiB).
    if sql.len() <= 16 << 10 {
        let cache = Classifier::new(wf.clone(), 64);
        assert_eq!(cache.classify(&sql), c);
        assert_eq!(cache.classify(&sql), c);
    }

    // Tight limits exercise the "too complex" paths on small inputs too.
    let small = Limits {
        max_sql_len: 64,
        max_paren_depth: 3,
        max_statements: 2,
    };
    let t = classify_with_limits(&sql, &wf, &small);
    check_spans(&sql, &t);

    if sql.len() + 1 < 1 << 20 {
        let mut padded = sql.clone();
        padded.push(' ');
        let p = classify(&padded, &wf);
        assert_eq!(
            (p.is_replica_safe(), p.may_write(), p.count()),
            (c.is_replica_safe(), c.may_write(), c.count()),
            "trailing whitespace changed the verdict of {sql:?}"
        );
    }
}
