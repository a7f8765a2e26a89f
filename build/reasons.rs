// The reasons table (the `reasons!` invocation in src/decision.rs) as `POLARSPLIT_REASON_*`
// constants for the header: shared by build.rs (feature `generate-header`) and the freshness
// test. A row appended to the table appears in the next generated header by itself.

/// One row: `Variant = number, "NAME", "doc";`, with the `//` group comment above it.
pub struct Row {
    pub number: u32,
    pub name: String,
    pub doc: String,
    pub group: Option<String>,
}

/// Reads the rows of the `reasons! { … }` invocation (not the `macro_rules!` definition).
pub fn rows(decision_rs: &str) -> Result<Vec<Row>, String> {
    let start = decision_rs
        .find("\nreasons! {")
        .ok_or("src/decision.rs: no `reasons! {` invocation")?;
    let body = &decision_rs[start + "\nreasons! {".len()..];
    let mut rows = Vec::new();
    let mut group = None;
    let mut pending = String::new();
    for line in body.lines() {
        let t = line.trim();
        if t == "}" && pending.trim().is_empty() {
            return Ok(rows);
        }
        if let Some(c) = t.strip_prefix("//") {
            group = Some(c.trim().to_string());
            continue;
        }
        pending.push_str(t);
        pending.push(' ');
        if t.ends_with(';') {
            rows.push(row(pending.trim(), group.clone())?);
            pending.clear();
        }
    }
    Err("src/decision.rs: the `reasons!` invocation does not end".into())
}

fn row(text: &str, group: Option<String>) -> Result<Row, String> {
    let bad = || format!("src/decision.rs: cannot read reasons row `{text}`");
    let (_, rest) = text.split_once('=').ok_or_else(bad)?;
    let (number, rest) = rest.split_once(',').ok_or_else(bad)?;
    let number = number.trim().parse().map_err(|_| bad())?;
    let (name, rest) = string_literal(rest.trim()).ok_or_else(bad)?;
    let rest = rest.trim().strip_prefix(',').ok_or_else(bad)?;
    let (doc, rest) = string_literal(rest.trim()).ok_or_else(bad)?;
    let c_name = name
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if rest.trim() != ";" || !c_name {
        return Err(bad());
    }
    Ok(Row {
        number,
        name,
        doc,
        group,
    })
}

/// A `"…"` literal at the start of `s` (with `\"` and `\\` escapes) and what follows it.
fn string_literal(s: &str) -> Option<(String, &str)> {
    let s = s.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[i + 1..])),
            '\\' => out.push(chars.next()?.1),
            c => out.push(c),
        }
    }
    None
}

/// Rust constants for cbindgen: one documented `POLARSPLIT_REASON_*` per row.
pub fn rust_constants(rows: &[Row]) -> String {
    let mut out = String::from(
        "// Generated from the reasons table of src/decision.rs by build/reasons.rs.\n",
    );
    for r in rows {
        let doc = match &r.group {
            Some(g) => format!("{}\n({g})", r.doc),
            None => r.doc.clone(),
        };
        for line in doc.replace("*/", "* /").lines() {
            out.push_str(&format!("/// {line}\n"));
        }
        out.push_str(&format!(
            "pub const POLARSPLIT_REASON_{}: PolarsplitReason = {};\n",
            r.name, r.number
        ));
    }
    out
}
