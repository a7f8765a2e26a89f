//! The engine's classification verdicts for SQL read from stdin, one statement (Query string) per
//! line — the way the live tests (tests/e2e/test_builtins_live.py) and operators check what the
//! engine would do with a statement.
//!
//! ```text
//! cargo run --example classify -- [--set name=value]... [--catalog FILE] [--database DB] [--lists]
//! ```
//! Each input line yields `replica|primary <TAB> REASON <TAB> effects` (REASON is `NONE` for a
//! replica-safe read; effects lists `unseen` for code the engine cannot see into, or `-`).
//! `--set` takes any configuration setting (`unknown_functions=replica`, `read_functions=f`, …).
//! `--catalog FILE` reports a user-function catalogue for `--database` (default `postgres`) as the
//! host would: lines of `schema <TAB> name <TAB> i|s|v`. `--lists` prints the built-in table and
//! the reviewed lists instead of reading stdin. `--nul` reads NUL-separated records instead of
//! lines (for statements that span lines).

use std::io::{BufRead, Write};

use polarsplit::internals::classify::{builtins, Classification, Effects, Kind};
use polarsplit::Reason;
use polarsplit::{ConfigBuilder, Engine};
use polarsplit::{UserFunction, Volatility};

fn verdict(c: &Classification) -> (&'static str, &'static str) {
    if c.is_replica_safe() {
        return ("replica", "NONE");
    }
    let reason = if c.count() > 1 {
        Reason::MultiStatement
    } else if c.hint_primary {
        Reason::HintPrimary
    } else if c.first().kind == Kind::Empty {
        Reason::EmptyQuery
    } else {
        Reason::from_not_safe(c.first().not_safe)
    };
    ("primary", reason.name())
}

fn lists(out: &mut impl Write) -> std::io::Result<()> {
    use builtins::flags::*;
    let t = builtins::default_table();
    writeln!(out, "table\t{}\t{}\t{}", t.major(), t.rows(), t.len())?;
    for (name, f) in t.entries() {
        let vol: String = [(IMM, 'i'), (STA, 's'), (VOL, 'v')]
            .iter()
            .filter(|(bit, _)| f & bit != 0)
            .map(|(_, c)| *c)
            .collect();
        let verdict = t.verdict_name(name).unwrap_or("NONE");
        writeln!(out, "builtin\t{name}\t{vol}\t{verdict}")?;
    }
    for (word, cat) in t.keywords() {
        writeln!(out, "keyword\t{word}\t{cat}")?;
    }
    for (kind, list) in [
        ("read_safe_volatile", builtins::READ_SAFE_VOLATILE),
        ("never_safe", builtins::NEVER_SAFE),
        ("runs_sql_text", builtins::RUNS_SQL_TEXT),
        ("server_dependent", builtins::SERVER_DEPENDENT),
        (
            "server_dependent_relation",
            builtins::SERVER_DEPENDENT_RELATIONS,
        ),
        (
            "server_dependent_setting",
            builtins::SERVER_DEPENDENT_SETTINGS,
        ),
    ] {
        for e in list {
            writeln!(out, "{kind}\t{e}")?;
        }
    }
    Ok(())
}

fn read_catalog(path: &str) -> Result<Vec<UserFunction>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let [schema, name, vol] = f[..] else {
            return Err(format!(
                "{path}:{}: expected schema<TAB>name<TAB>i|s|v",
                i + 1
            ));
        };
        let volatility = Volatility::from_provolatile(vol.bytes().next().unwrap_or(b'?'))
            .ok_or_else(|| format!("{path}:{}: volatility {vol:?}", i + 1))?;
        v.push(UserFunction {
            schema: schema.to_string(),
            name: name.to_string(),
            volatility,
        });
    }
    Ok(v)
}

fn run() -> Result<(), String> {
    let mut builder = ConfigBuilder::new();
    let mut catalog = None;
    let mut database = "postgres".to_string();
    let mut nul = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--set" => {
                let kv = value()?;
                let (k, v) = kv
                    .split_once('=')
                    .ok_or(format!("--set {kv}: name=value"))?;
                builder.set(k, v).map_err(|e| e.to_string())?;
            }
            "--catalog" => catalog = Some(value()?),
            "--database" => database = value()?,
            "--nul" => nul = true,
            "--lists" => {
                return lists(&mut std::io::stdout().lock()).map_err(|e| e.to_string());
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let engine = Engine::new(builder.build().map_err(|e| e.to_string())?);
    if let Some(path) = catalog {
        engine
            .set_function_catalog(database.as_bytes(), read_catalog(&path)?)
            .map_err(|e| e.to_string())?;
    }
    let classifier = engine.classifier();
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let sep = if nul { 0 } else { b'\n' };
    for record in stdin.lock().split(sep) {
        let record = record.map_err(|e| e.to_string())?;
        let line = String::from_utf8_lossy(&record);
        let line = line.strip_suffix('\r').unwrap_or(&line);
        let c = classifier.classify_in(database.as_bytes(), line);
        let (place, reason) = verdict(&c);
        let fx = if c.effects().contains(Effects::RUNS_CODE) {
            "unseen"
        } else {
            "-"
        };
        writeln!(out, "{place}\t{reason}\t{fx}").map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("classify: {e}");
        std::process::exit(2);
    }
}
