//! The few keywords the statement scan recognises, compared without allocation: a word of up to
//! 8 bytes is packed into one integer (SPEC §7 needs them to find reads, locking clauses, INTO,
//! data-modifying CTEs and `BEGIN ATOMIC` bodies).

/// Keywords pass 1 cares about, recognised without allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kw {
    With,
    Insert,
    Update,
    Delete,
    Merge,
    Into,
    For,
    No,
    Key,
    Share,
    Select,
    Values,
    Table,
    Temp,
    Temporary,
    Global,
    Local,
    Unlogged,
    Begin,
    Atomic,
    Case,
    End,
    Create,
    Other,
}

/// Packs up to 8 bytes, ASCII-lower-cased by `| 0x20` (exact for letters; no other identifier
/// byte becomes a letter), so a keyword test is one integer compare.
const fn pack(b: &[u8]) -> u64 {
    let mut v = 0u64;
    let mut i = 0;
    while i < b.len() && i < 8 {
        v |= ((b[i] | 0x20) as u64) << (8 * i);
        i += 1;
    }
    v
}

pub(super) fn kw_of(b: &[u8]) -> Kw {
    if b.len() > 8 {
        return if b.eq_ignore_ascii_case(b"temporary") {
            Kw::Temporary
        } else {
            Kw::Other
        };
    }
    const NO: u64 = pack(b"no");
    const FOR: u64 = pack(b"for");
    const KEY: u64 = pack(b"key");
    const END: u64 = pack(b"end");
    const WITH: u64 = pack(b"with");
    const INTO: u64 = pack(b"into");
    const TEMP: u64 = pack(b"temp");
    const CASE: u64 = pack(b"case");
    const MERGE: u64 = pack(b"merge");
    const SHARE: u64 = pack(b"share");
    const TABLE: u64 = pack(b"table");
    const LOCAL: u64 = pack(b"local");
    const BEGIN: u64 = pack(b"begin");
    const INSERT: u64 = pack(b"insert");
    const UPDATE: u64 = pack(b"update");
    const DELETE: u64 = pack(b"delete");
    const SELECT: u64 = pack(b"select");
    const VALUES: u64 = pack(b"values");
    const GLOBAL: u64 = pack(b"global");
    const ATOMIC: u64 = pack(b"atomic");
    const CREATE: u64 = pack(b"create");
    const UNLOGGED: u64 = pack(b"unlogged");
    // Equal packs mean equal words: `x | 0x20` is a given lower-case letter only for that letter
    // in either case, and is never 0, so a longer identifier never packs like a shorter keyword.
    match pack(b) {
        NO => Kw::No,
        FOR => Kw::For,
        KEY => Kw::Key,
        END => Kw::End,
        WITH => Kw::With,
        INTO => Kw::Into,
        TEMP => Kw::Temp,
        CASE => Kw::Case,
        MERGE => Kw::Merge,
        SHARE => Kw::Share,
        TABLE => Kw::Table,
        LOCAL => Kw::Local,
        BEGIN => Kw::Begin,
        INSERT => Kw::Insert,
        UPDATE => Kw::Update,
        DELETE => Kw::Delete,
        SELECT => Kw::Select,
        VALUES => Kw::Values,
        GLOBAL => Kw::Global,
        ATOMIC => Kw::Atomic,
        CREATE => Kw::Create,
        UNLOGGED => Kw::Unlogged,
        _ => Kw::Other,
    }
}

pub(super) fn is_read_start(k: Kw) -> bool {
    matches!(k, Kw::Select | Kw::Values | Kw::Table | Kw::With)
}
