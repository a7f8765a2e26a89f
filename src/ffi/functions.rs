//! The F-policy's host input (SPEC §7): the writer's user functions per database, the writer's
//! server version that picks the table of built-ins, and the writer's sequences per database
//! (S-7: a standby holds a sequence WAL-logged ahead of the primary).
//!
//! Sequences have a function and a struct of their own rather than a "kind" on
//! `polarsplit_function`: a sequence has no volatility, and a host that reports no sequences
//! keeps calling the function catalogue exactly as before. The two reports of a database are
//! replaced independently (the example proxy makes both from one load).

use std::ffi::c_char;

use super::cluster::PolarsplitEngine;
use super::handle::{boundary, read_sized, slice, try_arg, try_out, try_ref, Growable};
use super::status::{PolarsplitStatus, POLARSPLIT_DONE, POLARSPLIT_ERR_ABI, POLARSPLIT_OK};
use super::status::{POLARSPLIT_ERR_INVALID_ARGUMENT, POLARSPLIT_ERR_LIMIT, POLARSPLIT_ERR_NULL};
use crate::classify::{CatalogError, UserFunction, UserObject, UserSequence, Volatility};

/// A function's volatility (`polarsplit_function.volatility`): the byte `pg_proc.provolatile`
/// holds, so a host copies the column as it reads it.
pub type PolarsplitVolatility = u8;
/// `provolatile = 'i'`: read-safe (F-policy).
#[allow(dead_code)] // for the header: the host names the byte it copies
pub const POLARSPLIT_VOLATILITY_IMMUTABLE: PolarsplitVolatility = b'i';
/// `provolatile = 's'`: read-safe (F-policy).
#[allow(dead_code)] // for the header: the host names the byte it copies
pub const POLARSPLIT_VOLATILITY_STABLE: PolarsplitVolatility = b's';
/// `provolatile = 'v'`: not read-safe; a read calling any function of this name (in any schema,
/// any overload) goes to the writer.
#[allow(dead_code)] // for the header: the host names the byte it copies
pub const POLARSPLIT_VOLATILITY_VOLATILE: PolarsplitVolatility = b'v';

/// One user function of the writer's catalogue, as `pg_proc` gives it (report every overload:
/// the F-policy judges a name by all the functions that carry it). Grows at the end:
/// `polarsplit_engine_set_function_catalog` takes the host's `sizeof` as the array's stride; a
/// field appended later reads as 0 from an older host.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitFunction {
    /// `pg_namespace.nspname` (UTF-8, no NUL needed; NULL with length 0 for none). Kept for
    /// the host's logs: a call matches the name in any schema (a `search_path` may put a user
    /// function ahead of `pg_catalog`).
    pub schema: *const c_char,
    /// Its length in bytes.
    pub schema_len: usize,
    /// `pg_proc.proname` as stored (UTF-8, 1 to 63 bytes, no NUL needed).
    pub name: *const c_char,
    /// Its length in bytes.
    pub name_len: usize,
    /// `pg_proc.provolatile`: one of `POLARSPLIT_VOLATILITY_*`.
    pub volatility: PolarsplitVolatility,
}

// SAFETY: repr(C) integers and raw pointers.
unsafe impl Growable for PolarsplitFunction {
    const BASE_SIZE: usize = std::mem::size_of::<PolarsplitFunction>();
}

/// One sequence relation of the writer's catalogue (`pg_class` rows of `relkind = 'S'`), for
/// `polarsplit_engine_set_sequence_catalog`. Grows at the end: the function takes the host's
/// `sizeof` as the array's stride; a field appended later reads as 0 from an older host.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitSequence {
    /// `pg_namespace.nspname` (UTF-8, no NUL needed; NULL with length 0 for none). Kept for
    /// the host's logs: a statement matches the name in any schema (a `search_path` may resolve
    /// an unqualified name to any of them).
    pub schema: *const c_char,
    /// Its length in bytes.
    pub schema_len: usize,
    /// `pg_class.relname` as stored (UTF-8, 1 to 63 bytes, no NUL needed).
    pub name: *const c_char,
    /// Its length in bytes.
    pub name_len: usize,
}

// SAFETY: repr(C) integers and raw pointers.
unsafe impl Growable for PolarsplitSequence {
    const BASE_SIZE: usize = std::mem::size_of::<PolarsplitSequence>();
}

/// One object of the writer's catalogue whose use runs code a statement's text does not show
/// (SPEC S-6), for `polarsplit_engine_set_object_catalog`: a view, a table under row-level
/// security, a domain, a user cast's source or target type, a user operator. Grows at the end:
/// the function takes the host's `sizeof` as the array's stride; a field appended later reads
/// as 0 from an older host.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitObject {
    /// `pg_namespace.nspname` (UTF-8, no NUL needed; NULL with length 0 for none). Kept for
    /// the host's logs: a statement matches the name in any schema.
    pub schema: *const c_char,
    /// Its length in bytes.
    pub schema_len: usize,
    /// The name a statement invokes the object by, as stored (`pg_class.relname`,
    /// `pg_type.typname`, `pg_operator.oprname`; UTF-8, 1 to 63 bytes, no NUL needed).
    pub name: *const c_char,
    /// Its length in bytes.
    pub name_len: usize,
    /// SQL the engine classifies as if a statement naming the object also ran it (UTF-8, no
    /// NUL needed; see `polarsplit_engine_set_object_catalog` for each kind's text).
    pub definition: *const c_char,
    /// Its length in bytes.
    pub definition_len: usize,
}

// SAFETY: repr(C) integers and raw pointers.
unsafe impl Growable for PolarsplitObject {
    const BASE_SIZE: usize = std::mem::size_of::<PolarsplitObject>();
}

/// The UTF-8 text at `p` (`len` bytes; NULL only with 0).
///
/// # Safety
/// `p` must be NULL or point to `len` readable bytes.
unsafe fn utf8(p: *const c_char, len: usize) -> Result<String, PolarsplitStatus> {
    // SAFETY: as documented.
    let b = unsafe { slice(p.cast::<u8>(), len) }?;
    std::str::from_utf8(b)
        .map(str::to_owned)
        .map_err(|_| POLARSPLIT_ERR_INVALID_ARGUMENT)
}

/// The Rust value of one host struct.
fn user_function(f: &PolarsplitFunction) -> Result<UserFunction, PolarsplitStatus> {
    let volatility =
        Volatility::from_provolatile(f.volatility).ok_or(POLARSPLIT_ERR_INVALID_ARGUMENT)?;
    // SAFETY: the host promises each pointer readable for its length (the exported function's
    // `# Safety`).
    let (schema, name) = unsafe { (utf8(f.schema, f.schema_len)?, utf8(f.name, f.name_len)?) };
    Ok(UserFunction {
        schema,
        name,
        volatility,
    })
}

/// The Rust value of one host struct.
fn user_sequence(s: &PolarsplitSequence) -> Result<UserSequence, PolarsplitStatus> {
    // SAFETY: the host promises each pointer readable for its length (the exported function's
    // `# Safety`).
    let (schema, name) = unsafe { (utf8(s.schema, s.schema_len)?, utf8(s.name, s.name_len)?) };
    Ok(UserSequence { schema, name })
}

/// The Rust value of one host struct.
fn user_object(o: &PolarsplitObject) -> Result<UserObject, PolarsplitStatus> {
    // SAFETY: the host promises each pointer readable for its length (the exported function's
    // `# Safety`).
    let (schema, name, definition) = unsafe {
        (
            utf8(o.schema, o.schema_len)?,
            utf8(o.name, o.name_len)?,
            utf8(o.definition, o.definition_len)?,
        )
    };
    Ok(UserObject {
        schema,
        name,
        definition,
    })
}

/// Every element of the host's array of `n` structs of `size` bytes each, converted by `each`.
///
/// # Safety
/// `items` must be NULL (only with `n == 0`) or point to `n * size` readable bytes.
unsafe fn host_array<T: Growable + Copy, U>(
    items: *const T,
    n: usize,
    size: usize,
    each: impl Fn(&T) -> Result<U, PolarsplitStatus>,
) -> Result<Vec<U>, PolarsplitStatus> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if items.is_null() {
        return Err(POLARSPLIT_ERR_NULL);
    }
    if size < T::BASE_SIZE {
        return Err(POLARSPLIT_ERR_ABI);
    }
    if n.checked_mul(size).is_none_or(|b| b > isize::MAX as usize) {
        return Err(POLARSPLIT_ERR_INVALID_ARGUMENT);
    }
    let base = items.cast::<u8>();
    (0..n)
        .map(|i| {
            // SAFETY: element `i` starts `i * size` bytes in, inside the `n * size` readable
            // bytes (checked not to overflow); `read_sized` reads `size` bytes of it at most.
            let x = unsafe { read_sized(base.add(i * size).cast::<T>(), size) }?;
            each(&x)
        })
        .collect()
}

/// Every function of the host's array (see [`host_array`]).
///
/// # Safety
/// As [`host_array`].
unsafe fn user_functions(
    fns: *const PolarsplitFunction,
    n: usize,
    size: usize,
) -> Result<Vec<UserFunction>, PolarsplitStatus> {
    // SAFETY: as documented.
    unsafe { host_array(fns, n, size, user_function) }
}

/// Every sequence of the host's array (see [`host_array`]).
///
/// # Safety
/// As [`host_array`].
unsafe fn user_sequences(
    seqs: *const PolarsplitSequence,
    n: usize,
    size: usize,
) -> Result<Vec<UserSequence>, PolarsplitStatus> {
    // SAFETY: as documented.
    unsafe { host_array(seqs, n, size, user_sequence) }
}

/// Every object of the host's array (see [`host_array`]).
///
/// # Safety
/// As [`host_array`].
unsafe fn user_objects(
    objects: *const PolarsplitObject,
    n: usize,
    size: usize,
) -> Result<Vec<UserObject>, PolarsplitStatus> {
    // SAFETY: as documented.
    unsafe { host_array(objects, n, size, user_object) }
}

/// Exhaustive: a new catalogue error of the Rust API must be given its status here.
fn catalog_status(e: &CatalogError) -> PolarsplitStatus {
    match e {
        CatalogError::BadName(_)
        | CatalogError::BadSequenceName(_)
        | CatalogError::BadObjectName(_) => POLARSPLIT_ERR_INVALID_ARGUMENT,
        CatalogError::TooManyFunctions(_)
        | CatalogError::TooManySequences(_)
        | CatalogError::TooManyObjects(_)
        | CatalogError::TooManyDatabases(_) => POLARSPLIT_ERR_LIMIT,
    }
}

/// The catalogue query (SPEC §7 F-policy, S-6, S-7), a static NUL-terminated string: send it as
/// one simple `Query` on a connection to a database of the writer, and report its results with
/// the three `polarsplit_engine_set_*_catalog` functions below. Its four results come before one
/// `ReadyForQuery` and are told apart by their column counts:
/// 1. one column: the writer's `server_version_num`;
/// 2. three columns — schema, name, volatility (`i`, `s`, `v`) — every user function, one row per
///    overload, for `polarsplit_engine_set_function_catalog` (the query there);
/// 3. two columns — schema, name — every sequence, for `polarsplit_engine_set_sequence_catalog`,
///    and one more row, `pg_catalog` and `polarsplit_relations_<md5>`: a fingerprint of the
///    database's relations, so that DDL run on the primary directly makes the report differ
///    and statements prepared on pooled readers before it are prepared again;
/// 4. four columns — schema, name, definition, kind (`v` view, `p` row-level security policies,
///    `d` domain, `c` user cast, `o` user operator, `f` user function's body, `h` the user code
///    behind a relation or a type, `F` a foreign table or an ancestor of one) — for
///    `polarsplit_engine_set_object_catalog` (each kind's text is described there).
///
/// It begins with `SET LOCAL lock_timeout = '100ms'`: `pg_get_viewdef` locks each view and what
/// it reads until the Query ends, so the load fails fast rather than deadlock with a client's
/// DDL; then `SET LOCAL jit = off` (JIT would compile its closures for seconds). A host that needs a piece of it alone may run the queries the three functions document;
/// this text is the one the example proxy and the Pgpool-II patch send, and it changes with the
/// library when what the engine needs from the catalogue does.
///
/// # Safety
/// Always safe; the string is static.
#[no_mangle]
pub extern "C" fn polarsplit_catalog_query() -> *const c_char {
    crate::classify::CATALOG_QUERY_NUL.as_ptr().cast()
}

/// Replaces the catalogue of user functions of database `database` (SPEC §7 F-policy): every
/// function the writer's `pg_proc` has outside the built-in schemas, with its volatility — all of
/// them, every overload (a name missing from the report is unknown afterwards). Sessions whose
/// startup packet named that database (or, without one, whose user has that name) classify
/// against it from their next statement. Until a database has a catalogue, and for names it does
/// not list, a call of a function that is not a built-in is not read-safe (unless
/// `unknown_functions = replica`). Load it at start and per database the first time a client of
/// it connects, and again after DDL or periodically; a load that failed is best followed by
/// `polarsplit_engine_remove_function_catalog` (unknown functions then go to the writer, which
/// is safe) rather than keeping a catalogue that may be stale.
///
/// The query: the second result of `polarsplit_catalog_query()`, on a connection to that
/// database of the writer (extension functions installed into `pg_catalog` count as user
/// functions, built-ins do not; a user aggregate is `IMMUTABLE` in `pg_proc` whatever its support
/// functions do, so it is reported with their worst volatility).
///
/// `functions` is an array of `n` structs, `function_size` bytes apart: pass
/// `sizeof(polarsplit_function)` (the growth rule). The library copies what it keeps; the
/// array may be freed when the call returns. On any error nothing changes:
/// `POLARSPLIT_ERR_INVALID_ARGUMENT` for a name that is empty, longer than 63 bytes or not
/// UTF-8, a schema that is not UTF-8, or a volatility that is not `POLARSPLIT_VOLATILITY_*`;
/// `POLARSPLIT_ERR_LIMIT` beyond 1,048,576 functions in one database or 65,536 databases;
/// `POLARSPLIT_ERR_ABI` for a `function_size` below ABI 3's struct; `POLARSPLIT_ERR_NULL` for a
/// NULL `functions` with `n > 0`, or a NULL name or schema with a non-zero length.
///
/// # Safety
/// `engine` must be a live engine; `database` NULL (only with `database_len` 0) or
/// `database_len` readable bytes (any encoding, no NUL needed); `functions` NULL (only with
/// `n` 0) or `n * function_size` readable bytes, each struct's pointers readable for their
/// lengths.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_set_function_catalog(
    engine: *const PolarsplitEngine,
    database: *const c_char,
    database_len: usize,
    functions: *const PolarsplitFunction,
    n: usize,
    function_size: usize,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        // SAFETY: `database_len` readable bytes.
        let db = try_arg!(unsafe { slice(database.cast::<u8>(), database_len) });
        // SAFETY: `n * function_size` readable bytes.
        let fns = try_arg!(unsafe { user_functions(functions, n, function_size) });
        match e.inner.set_function_catalog(db, fns) {
            Ok(_) => POLARSPLIT_OK,
            Err(err) => catalog_status(&err),
        }
    }
}

/// Forgets the catalogue of database `database`: its user functions are unknown again (a read
/// calling one goes to the writer). `POLARSPLIT_DONE` when it had none.
///
/// # Safety
/// `engine` must be a live engine; `database` NULL (only with `database_len` 0) or
/// `database_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_remove_function_catalog(
    engine: *const PolarsplitEngine,
    database: *const c_char,
    database_len: usize,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        // SAFETY: `database_len` readable bytes.
        let db = try_arg!(unsafe { slice(database.cast::<u8>(), database_len) });
        if e.inner.remove_function_catalog(db) {
            POLARSPLIT_OK
        } else {
            POLARSPLIT_DONE
        }
    }
}

/// Replaces the sequences of database `database` (SPEC S-7): every sequence relation of the
/// writer's `pg_class` (`relkind = 'S'`) — all of them (a name missing from the report is not a
/// sequence afterwards). A standby holds a sequence WAL-logged ahead of the primary, so a read
/// naming one (`SELECT last_value FROM s`, in a FROM list, a join, a subquery or a CTE, in any
/// schema, quoted or not) is not replica-safe; sessions of that database classify against the
/// report from their next statement (a statement already parsed keeps the verdict it had).
/// Until a database's sequences are reported, and for a sequence created after the last report,
/// a read of one is not recognised: report them with the function catalogue (same load, same
/// refresh). The database's function catalogue is not touched, nor the other way round.
///
/// The query, on a connection to that database of the writer:
/// ```sql
/// SELECT n.nspname, c.relname
/// FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
/// WHERE c.relkind = 'S'
/// ```
///
/// `sequences` is an array of `n` structs, `sequence_size` bytes apart: pass
/// `sizeof(polarsplit_sequence)` (the growth rule). The library copies what it keeps; the
/// array may be freed when the call returns. On any error nothing changes:
/// `POLARSPLIT_ERR_INVALID_ARGUMENT` for a name that is empty, longer than 63 bytes or not
/// UTF-8, or a schema that is not UTF-8; `POLARSPLIT_ERR_LIMIT` beyond 1,048,576 sequences in
/// one database or 65,536 databases; `POLARSPLIT_ERR_ABI` for a `sequence_size` below this
/// struct's first version; `POLARSPLIT_ERR_NULL` for a NULL engine, a NULL `database` with a
/// non-zero length, a NULL `sequences` with `n > 0`, or a NULL name or schema with a non-zero
/// length.
///
/// # Safety
/// `engine` must be a live engine; `database` NULL (only with `database_len` 0) or
/// `database_len` readable bytes (any encoding, no NUL needed); `sequences` NULL (only with
/// `n` 0) or `n * sequence_size` readable bytes, each struct's pointers readable for their
/// lengths.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_set_sequence_catalog(
    engine: *const PolarsplitEngine,
    database: *const c_char,
    database_len: usize,
    sequences: *const PolarsplitSequence,
    n: usize,
    sequence_size: usize,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        // SAFETY: `database_len` readable bytes.
        let db = try_arg!(unsafe { slice(database.cast::<u8>(), database_len) });
        // SAFETY: `n * sequence_size` readable bytes.
        let seqs = try_arg!(unsafe { user_sequences(sequences, n, sequence_size) });
        match e.inner.set_sequence_catalog(db, seqs) {
            Ok(_) => POLARSPLIT_OK,
            Err(err) => catalog_status(&err),
        }
    }
}

/// Forgets the sequences of database `database`: a read of one is not recognised again.
/// `POLARSPLIT_DONE` when it had none reported.
///
/// # Safety
/// `engine` must be a live engine; `database` NULL (only with `database_len` 0) or
/// `database_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_remove_sequence_catalog(
    engine: *const PolarsplitEngine,
    database: *const c_char,
    database_len: usize,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        // SAFETY: `database_len` readable bytes.
        let db = try_arg!(unsafe { slice(database.cast::<u8>(), database_len) });
        if e.inner.remove_sequence_catalog(db) {
            POLARSPLIT_OK
        } else {
            POLARSPLIT_DONE
        }
    }
}

/// Replaces the objects of database `database` whose use runs code a statement's text does not
/// show (SPEC S-6, S-5): all of them (a name missing from the report hides nothing afterwards).
/// A view's query, a row-level security policy's expressions, a domain's CHECK, a user cast's or
/// operator's function run when a statement reads the view or the table, casts to the domain or
/// the type, or applies the operator — and may call `set_config`, take an advisory lock or write.
/// Each object comes with the name a statement invokes it by and a definition: SQL the engine
/// classifies as it classifies a statement, finished against the database's function catalogue,
/// its sequences and the other objects (a view over a view). Any statement naming the object —
/// in any schema, anywhere in its text — then takes that verdict as if the definition were part
/// of its text: a view over a volatile or state-changing function keeps reads of it on the
/// writer (with a capture of the session's state after it, S-5), a domain whose CHECK calls a
/// user function makes the reader connection that ran it be reset before another session gets
/// it (S-6). Definitions are judged here, and again when the database's functions or sequences
/// are reported, never per statement. Sessions of that database classify against the report
/// from their next statement. Until a database's objects are reported, and for objects created
/// after the last report, such code is not seen: report them with the function catalogue (same
/// load, same refresh). The database's functions and sequences are not touched.
///
/// The query: the fourth result of `polarsplit_catalog_query()`, on a connection to that
/// database of the writer (its fourth column only tells the kinds apart in logs; a user cast is
/// reported under both of its types' names, and built-in types' SQL spellings such as `integer`
/// for `int4` are matched by the engine). `pg_get_viewdef` locks each view and the relations it
/// reads until the load's transaction ends, which is why that Query starts with `SET LOCAL
/// lock_timeout = '100ms'`: a client's DDL that takes those locks in another order would
/// otherwise deadlock with it and PostgreSQL may cancel the client's statement; a load that times
/// out is retried like any failed load. Each kind's definition:
/// - `v` a view: `pg_get_viewdef`;
/// - `p` a table under row-level security: `SELECT NULL, (<policy expression>), …` over all its
///   policies' `USING` and `WITH CHECK` expressions;
/// - `d` a domain: `SELECT NULL::<base type>, (<check expression>), …`; and a type or a table
///   that holds a domain (a field, an array's element, a range's subtype, at any depth):
///   `SELECT NULL::<domain>`;
/// - `c` a user cast, under each of its two types' names, and `o` a user operator:
///   `SELECT <schema>.<function>(NULL[, NULL])`, a call of the function it runs (for an
///   operator, then a call of each user support function of its operator families and of each
///   user function of the operators of its btree families, which sorting, index scans and
///   planning a clause with it may run);
/// - `f` a user function, under its name (a call names the function), with its body (a
///   SQL-standard body, `BEGIN ATOMIC` or `RETURN`, as `pg_get_functiondef` prints it): a volatile
///   one as a DO block that says DDL when its body says DDL or `EXECUTE`, else as a SELECT
///   calling the user functions its body names and the user operators it contains, from every
///   word it holds (so DDL they run, by attribute notation too, changes the catalogue); a STABLE
///   or IMMUTABLE SQL body in `prosrc` is the function's statements; another body that says DDL
///   or `EXECUTE` is reported as a DO block that does, one that says DML, a session command or a
///   cursor command (`OPEN`, `FETCH`, `MOVE`, `CLOSE`) as text that is no read, any other as a
///   SELECT calling every name the body writes before a parenthesis and every user operator it
///   contains, from every word it holds (names with non-ASCII characters too); a function with a
///   SET clause as text that is no read, or as `SELECT pg_catalog.set_config(NULL, NULL, NULL)`
///   when it sets a placeholder (the session keeps it); a LANGUAGE
///   internal function as a call of the built-in whose C code it runs; a function whose
///   argument or result (OUT and TABLE columns too) holds a domain as `SELECT NULL::<domain>`;
///   a user aggregate as `SELECT NULL, <schema>.<function>(NULL, …), …` calling its user
///   support functions (transition, final, combine, …). A STABLE function over
///   `pg_is_in_recovery()`, a sequence or a volatile function is then judged by what it runs,
///   not only by its label;
/// - `h` a relation, a type or a function whose use runs user code its name does not show, under
///   its name (a user function: its arguments' and result's types'; a built-in function or
///   operator whose result holds the source type of a user cast between two built-in types
///   that the server applies unasked, implicit or in assignment: that cast's — and when a
///   literal or a keyword makes values of that source type, under the name
///   `polarsplit: every statement`, which every statement of the database is judged with):
///   `SELECT NULL, <schema>.<function>(NULL, …), …` calling each user function the planner or
///   executor may run for it — a range type's `subtype_diff`, `canonical` and `subtype_opclass`,
///   a type's I/O functions, default operator classes and casts (a built-in type's: the user
///   casts from it and its user default operator classes), with those of the types it holds
///   (element, base type, subtype, a multirange's range, a composite's fields); for a relation,
///   its columns' types', its partition key's and indexes' operator classes and expressions,
///   and the IMMUTABLE or SQL functions (an operator's, and those of the operators of its btree
///   families, which the planner's predicate prover runs) of its CHECK constraints, its
///   statistics objects' expressions and its indexes' predicates and expressions (the planner
///   const-folds them and proves a read's clauses against them), with those of its
///   descendants (partitions, inheritance children);
/// - `F` a foreign table, or a table one is a partition or an inheritance child of:
///   `SELECT pg_catalog.pg_is_in_recovery()` (server-dependent: its wrapper reads where the
///   statement runs);
/// - `U` an unlogged relation, or a table one is a partition or an inheritance child of: the
///   same (its rows are the primary's alone; a standby refuses to read it).
///
/// `objects` is an array of `n` structs, `object_size` bytes apart: pass
/// `sizeof(polarsplit_object)` (the growth rule). The library copies what it keeps; the array
/// may be freed when the call returns. On any error nothing changes:
/// `POLARSPLIT_ERR_INVALID_ARGUMENT` for a name that is empty, longer than 63 bytes or not
/// UTF-8, or a schema or definition that is not UTF-8; `POLARSPLIT_ERR_LIMIT` beyond 65,536
/// objects in one database or 65,536 databases; `POLARSPLIT_ERR_ABI` for an `object_size` below
/// this struct's first version; `POLARSPLIT_ERR_NULL` for a NULL engine, a NULL `database` with
/// a non-zero length, a NULL `objects` with `n > 0`, or a NULL pointer with a non-zero length.
/// A definition the engine cannot classify as one read (not a query, longer than 1 MiB) keeps
/// every statement naming the object off replicas.
///
/// # Safety
/// `engine` must be a live engine; `database` NULL (only with `database_len` 0) or
/// `database_len` readable bytes (any encoding, no NUL needed); `objects` NULL (only with `n`
/// 0) or `n * object_size` readable bytes, each struct's pointers readable for their lengths.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_set_object_catalog(
    engine: *const PolarsplitEngine,
    database: *const c_char,
    database_len: usize,
    objects: *const PolarsplitObject,
    n: usize,
    object_size: usize,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        // SAFETY: `database_len` readable bytes.
        let db = try_arg!(unsafe { slice(database.cast::<u8>(), database_len) });
        // SAFETY: `n * object_size` readable bytes.
        let objs = try_arg!(unsafe { user_objects(objects, n, object_size) });
        match e.inner.set_object_catalog(db, objs) {
            Ok(_) => POLARSPLIT_OK,
            Err(err) => catalog_status(&err),
        }
    }
}

/// Forgets the objects of database `database` that hide code: their code is not seen again.
/// `POLARSPLIT_DONE` when it had none reported.
///
/// # Safety
/// `engine` must be a live engine; `database` NULL (only with `database_len` 0) or
/// `database_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_remove_object_catalog(
    engine: *const PolarsplitEngine,
    database: *const c_char,
    database_len: usize,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        // SAFETY: `database_len` readable bytes.
        let db = try_arg!(unsafe { slice(database.cast::<u8>(), database_len) });
        if e.inner.remove_object_catalog(db) {
            POLARSPLIT_OK
        } else {
            POLARSPLIT_DONE
        }
    }
}

/// Whether a session ran DDL in database `database` since the host last reported its catalogue
/// (SPEC S-6, S-7, F-policy): CREATE, ALTER or DROP of anything but an index, a role, a database
/// or a tablespace, or a DO block that says CREATE, ALTER or DROP, through this engine. Until the
/// host reports the database's function catalogue from a load that started after that DDL, no
/// read of the database is replica-safe (`POLARSPLIT_REASON_CATALOG_CHANGED`): a view, a function
/// shadowing a built-in or a sequence it created would otherwise be judged by a catalogue
/// without it. Poll it (it is one atomic load while no database is stale) and load that
/// database's catalogues at once when it answers `POLARSPLIT_OK`; `POLARSPLIT_DONE` when not
/// stale. DDL from connections that bypass the engine is not seen: it waits for the host's
/// periodic refresh. `POLARSPLIT_ERR_NULL` for a NULL engine or a NULL `database` with a non-zero
/// length.
///
/// # Safety
/// `engine` must be a live engine; `database` NULL (only with `database_len` 0) or
/// `database_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_catalog_changed(
    engine: *const PolarsplitEngine,
    database: *const c_char,
    database_len: usize,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        // SAFETY: `database_len` readable bytes.
        let db = try_arg!(unsafe { slice(database.cast::<u8>(), database_len) });
        if e.inner.catalog_changed(db) {
            POLARSPLIT_OK
        } else {
            POLARSPLIT_DONE
        }
    }
}

/// The host starts a load of database `database`'s catalogues (call it before the load's query
/// is sent): the function catalogue report of that load then ends the staleness of the DDL seen
/// before this call only (`polarsplit_engine_catalog_changed`), so DDL that ran while the load
/// was in flight keeps the database's reads on the writer until the next load. A host that never
/// calls it has each function catalogue report taken as covering all DDL seen. Returns
/// `POLARSPLIT_OK`; `POLARSPLIT_ERR_NULL` as above.
///
/// # Safety
/// `engine` must be a live engine; `database` NULL (only with `database_len` 0) or
/// `database_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_catalog_load_started(
    engine: *const PolarsplitEngine,
    database: *const c_char,
    database_len: usize,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        // SAFETY: `database_len` readable bytes.
        let db = try_arg!(unsafe { slice(database.cast::<u8>(), database_len) });
        e.inner.catalog_load_started(db);
        POLARSPLIT_OK
    }
}

/// DDL that ran on the writer through another engine (SPEC S-6, S-7, F-policy, E-2): a host
/// that runs one engine per process — Pgpool-II's children — shares how much DDL each engine's
/// sessions ran (`polarsplit_engine_sessions_ddl`) and reports it to the others with this call,
/// for the database it ran in, before their sessions route another statement. It is taken as if
/// a session of this engine had run it: until the host reports the database's function
/// catalogue from a load it started after this call (`polarsplit_engine_catalog_load_started`),
/// no read of the database is replica-safe (`POLARSPLIT_REASON_CATALOG_CHANGED`) — for sessions
/// already open too — and `polarsplit_engine_catalog_changed` answers `POLARSPLIT_OK`; statements
/// pooled reader connections prepared before it are prepared again. A database whose catalogue
/// was never reported is left to the host's first load. Returns `POLARSPLIT_OK`;
/// `POLARSPLIT_ERR_NULL` as above.
///
/// # Safety
/// `engine` must be a live engine; `database` NULL (only with `database_len` 0) or
/// `database_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_catalog_changed_elsewhere(
    engine: *const PolarsplitEngine,
    database: *const c_char,
    database_len: usize,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        // SAFETY: `database_len` readable bytes.
        let db = try_arg!(unsafe { slice(database.cast::<u8>(), database_len) });
        e.inner.catalog_changed_elsewhere(db);
        POLARSPLIT_OK
    }
}

/// How many DDL statements this engine's sessions have run since it was created, in any
/// database (those `polarsplit_engine_catalog_changed` follows, counted when the engine saw
/// them complete — before the client is sent their answer), into `*count`. One atomic load: a
/// host that runs one engine per process polls it after feeding backend bytes and, when it
/// moved, tells the other processes, whose engines hear it through
/// `polarsplit_engine_catalog_changed_elsewhere`; DDL reported that way is not counted here.
/// Returns `POLARSPLIT_OK`; `POLARSPLIT_ERR_NULL` for a NULL engine or `count`.
///
/// # Safety
/// `engine` must be a live engine; `count` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_sessions_ddl(
    engine: *const PolarsplitEngine,
    count: *mut u64,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        let mut out = try_out!(count);
        out.set(e.inner.sessions_ddl());
        POLARSPLIT_OK
    }
}

/// The writer's `server_version_num` (e.g. 150018, from `SHOW server_version_num`): picks the
/// table of built-in functions classification uses (that major's, else the nearest lower one;
/// PostgreSQL 15's until a version is reported). Returns `POLARSPLIT_OK`.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_set_writer_server_version(
    engine: *const PolarsplitEngine,
    server_version_num: u32,
) -> PolarsplitStatus {
    boundary! {
        try_ref!(engine).inner.set_writer_server_version(server_version_num);
        POLARSPLIT_OK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str, v: u8) -> PolarsplitFunction {
        PolarsplitFunction {
            schema: c"public".as_ptr(),
            schema_len: 6,
            name: name.as_ptr().cast(),
            name_len: name.len(),
            volatility: v,
        }
    }

    #[test]
    fn f_policy_a_host_array_is_read_with_its_stride_and_checked_whole() {
        let size = std::mem::size_of::<PolarsplitFunction>();
        let fns = [f("a", b's'), f("b", b'v')];
        let got = unsafe { user_functions(fns.as_ptr(), 2, size) }.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[1].name.as_str(), got[1].volatility),
            ("b", Volatility::Volatile)
        );
        // A newer host's larger struct: the stride is its size, the tail ignored.
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Newer {
            f: PolarsplitFunction,
            extra: u64,
        }
        let newer = [
            Newer {
                f: f("c", b'i'),
                extra: 9,
            },
            Newer {
                f: f("d", b's'),
                extra: 9,
            },
        ];
        let got = unsafe { user_functions(newer.as_ptr().cast(), 2, std::mem::size_of::<Newer>()) }
            .unwrap();
        assert_eq!(
            (got[1].name.as_str(), got[1].volatility),
            ("d", Volatility::Stable)
        );
        let bad = [f("a", b's'), f("b", b'x')];
        assert_eq!(
            unsafe { user_functions(bad.as_ptr(), 2, size) }.err(),
            Some(POLARSPLIT_ERR_INVALID_ARGUMENT)
        );
        assert_eq!(
            unsafe { user_functions(fns.as_ptr(), 2, size - 1) }.err(),
            Some(POLARSPLIT_ERR_ABI)
        );
        assert_eq!(
            unsafe { user_functions(fns.as_ptr(), usize::MAX, size) }.err(),
            Some(POLARSPLIT_ERR_INVALID_ARGUMENT)
        );
        assert_eq!(
            unsafe { user_functions(std::ptr::null(), 1, size) }.err(),
            Some(POLARSPLIT_ERR_NULL)
        );
        let not_utf8 = [0xffu8, 0xfe];
        let mut g = f("a", b's');
        g.name = not_utf8.as_ptr().cast();
        g.name_len = 2;
        assert_eq!(
            user_function(&g).err(),
            Some(POLARSPLIT_ERR_INVALID_ARGUMENT)
        );
    }
}
