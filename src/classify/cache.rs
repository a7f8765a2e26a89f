//! A bounded, thread-safe cache of classifications keyed by the exact statement text, and
//! behind it one keyed by the text's shape (`shape.rs`).
//!
//! Applications send the same few hundred statement texts over and over; a hit costs one hash,
//! a short lock and a compare (the table is keyed by the text's hash, the entry holds the text),
//! and allocates nothing (a [`Classification`] clones without allocating). Memory is bounded by entry count and total key bytes per shard; a full shard is
//! simply cleared — crude, but O(1), deterministic and good enough for a working set that fits.
//!
//! A text is admitted on its second sighting only. Texts with inline literals (`… WHERE aid =
//! 48213`) are mostly seen once; admitting them would cost an allocation each and, by filling
//! shards, clear the statements that do repeat. Each shard remembers the hashes of recent misses
//! in a small table of fingerprints (a "doorkeeper", as in TinyLFU; newer misses overwrite older
//! ones) and admits a text whose fingerprint it holds. A repeating text is classified cold twice
//! instead of once; a text seen once is admitted only by a 32-bit fingerprint collision.
//!
//! Those texts share a shape, though: a text that misses is lexed to find its shape (the
//! literals that cannot change the verdict replaced by markers), and a shape seen twice keeps its
//! classification (in the shape's coordinates, mapped back onto each text; the key is compared in
//! full, so a hash collision only costs a miss). Shapes have the same bounds as texts, and their
//! own doorkeeper. Only single statements are kept by shape (mapping a list of statements back
//! would allocate), and never one whose verdict read raw text.
//!
//! In front of both shared tables each host thread keeps a few slots of its own (`Local`): the
//! entries it used last, found without a lock. For a short text the thread's shape slots are
//! tried before the shared text table, so a statement with a new literal takes no lock at all
//! (and a text served that way is not admitted to the text table: its shape serves it). Before
//! the text is scanned for its shape, it is matched along the key of the shape this thread used
//! last for a text with the same first 16 bytes (its "guide", `Shape::scan_as`): a pgbench
//! statement with a new literal then costs a hash, one compare of the kept bytes and the lexing
//! of the literal.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rustc_hash::FxBuildHasher;

use super::functions::{FunctionCatalogs, FunctionPolicy};
use super::shape::{self, Shape};
use super::{statement, Classification, Limits, NotSafe, WriteFunctions};

/// Texts longer than this are classified every time: they are rare and would crowd out the rest.
pub(super) const MAX_CACHED_LEN: usize = 16 * 1024;

/// Average key bytes budgeted per entry when sizing the byte bound.
const BYTES_PER_ENTRY: usize = 512;

const SHARDS: usize = 16;

/// The text's hash for the shard choice and the doorkeeper: FxHash (`rustc-hash`, fast on short
/// keys; not DoS-resistant — the byte and entry bounds keep a hostile client from growing
/// anything, only from evicting), finished by MurmurHash3's fmix64 so that every bit depends on
/// every input byte (the shard index, the doorkeeper positions and its fingerprint take
/// different bit ranges).
fn text_hash(sql: &str) -> u64 {
    let mut h = FxBuildHasher.build_hasher();
    h.write(sql.as_bytes());
    shape::mix(h.finish())
}

/// A table of 32-bit fingerprints (never 0; 0 is an empty slot) of keys missed once, each at
/// one of two positions derived from its hash: TinyLFU's "doorkeeper".
struct Doorkeeper {
    seen: Box<[u32]>,
}

impl Doorkeeper {
    fn new(slots: usize) -> Doorkeeper {
        Doorkeeper {
            seen: vec![0; slots].into_boxed_slice(),
        }
    }

    /// A key's fingerprint and its two positions, from its hash.
    fn slots(&self, hash: u64) -> (u32, [usize; 2]) {
        // Positions from bits 0.. and 42.. (bits 22..26 are the same for a whole shard); the
        // fingerprint from a further multiply, so it is not the positions' bits again.
        let mask = (self.seen.len() - 1) as u64;
        let fp = (hash.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32 | 1;
        (fp, [(hash & mask) as usize, ((hash >> 42) & mask) as usize])
    }

    /// Whether the key was seen; if it was, forgets it (it is about to be admitted), otherwise
    /// remembers it in an empty position or, with both taken, over the older-looking one.
    fn seen_before(&mut self, hash: u64) -> bool {
        let (fp, pos) = self.slots(hash);
        for i in pos {
            if let Some(e) = self.seen.get_mut(i).filter(|e| **e == fp) {
                *e = 0;
                return true;
            }
        }
        let free = pos.into_iter().find(|&i| self.seen.get(i) == Some(&0));
        // Neither free: evict by a bit of the hash, so a pair of keys sharing one position
        // does not keep evicting each other through the other.
        let victim = free.unwrap_or(pos[(hash & 1) as usize]);
        if let Some(e) = self.seen.get_mut(victim) {
            *e = fp;
        }
        false
    }

    fn clear(&mut self) {
        self.seen.fill(0);
    }
}

/// A shape's cached classification, in the shape's coordinates (`shape.rs`).
struct ShapeEntry {
    key: Box<[u8]>,
    class: Classification,
    /// The key's hash.
    hash: u64,
    /// Whether texts may be matched against the key directly (`shape::guidable`).
    guided: bool,
}

/// Shape hashes are mixed already: the map uses them as they are.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A text's cached classification (the map is keyed by the text's hash; the text is compared).
struct TextEntry {
    text: Box<str>,
    class: Classification,
}

/// Slots of each thread's local caches (direct-mapped by hash): texts, shapes.
const LOCAL_TEXTS: usize = 128;
const LOCAL_SHAPES: usize = 32;
/// Slots of each thread's guide: shapes by the first [`GUIDE_PREFIX`] bytes of their texts.
const LOCAL_GUIDES: usize = 16;
/// Bytes of a text that choose its guide slot (a shape whose first elided token starts
/// earlier is not kept there: its texts' first bytes differ).
const GUIDE_PREFIX: usize = 16;
/// Longest text (or shape key) a thread keeps locally.
const LOCAL_MAX_LEN: usize = 1024;

/// A thread's copy of a shared entry, for the classifier `owner`.
struct LocalSlot<T> {
    owner: u64,
    hash: u64,
    entry: Arc<T>,
}

/// Each host thread's small front caches: the entries it used last, found without a lock or
/// an atomic read-modify-write (a hit costs the hash, a compare and a clone). They hold shared
/// entries (a slot is filled by an `Arc` clone, never by an allocation) of any classifier,
/// told apart by the classifier's id. An entry never goes stale: a classifier's policy never
/// changes, so a text's classification never does; `clear` only drops the shared tables.
struct Local {
    texts: [Option<LocalSlot<TextEntry>>; LOCAL_TEXTS],
    shapes: [Option<LocalSlot<ShapeEntry>>; LOCAL_SHAPES],
    /// The same shape entries by their texts' first bytes: a text is matched against the key
    /// found there before it is scanned for its shape (`Shape::scan_as`).
    guides: [Option<LocalSlot<ShapeEntry>>; LOCAL_GUIDES],
    /// Shape hits served here, for `shape_hits`: (classifier id, count) of the last few.
    shape_hits: [(u64, u64); 4],
    /// Of those, the ones served along a guide (`Shape::scan_as`).
    #[cfg(test)]
    guided: u64,
}

thread_local! {
    static LOCAL: RefCell<Local> = const {
        RefCell::new(Local {
            texts: [const { None }; LOCAL_TEXTS],
            shapes: [const { None }; LOCAL_SHAPES],
            guides: [const { None }; LOCAL_GUIDES],
            shape_hits: [(0, 0); 4],
            #[cfg(test)]
            guided: 0,
        })
    };
}

/// The hash of a text's first [`GUIDE_PREFIX`] bytes (`None`: a shorter text).
fn prefix_hash(sql: &str) -> Option<u64> {
    let p = sql.as_bytes().get(..GUIDE_PREFIX)?;
    let (a, b) = p.split_at(8);
    let word = |w: &[u8]| {
        let mut x = [0u8; 8];
        x.copy_from_slice(w);
        u64::from_le_bytes(x)
    };
    Some(shape::mix(
        word(a).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ word(b),
    ))
}

/// A shape hit served by the local slots, for `shape_hits`.
fn count_local_hit(l: &mut Local, id: u64) {
    match l.shape_hits.iter().position(|&(o, _)| o == id) {
        Some(i) => l.shape_hits[i].1 += 1,
        None => {
            l.shape_hits.rotate_right(1);
            l.shape_hits[0] = (id, 1);
        }
    }
}

/// Ids of classifiers, for the local caches.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

struct Shard {
    /// Classifications by text hash (hashed once per lookup; the entry holds the text).
    map: HashMap<u64, Arc<TextEntry>, BuildHasherDefault<IdHasher>>,
    bytes: usize,
    texts_seen: Doorkeeper,
    /// Classifications by shape hash (the entry holds the key to compare).
    shapes: HashMap<u64, Arc<ShapeEntry>, BuildHasherDefault<IdHasher>>,
    shape_bytes: usize,
    shapes_seen: Doorkeeper,
    /// Classifications served by shape (counted under the lock the lookup holds anyway).
    shape_hits: u64,
}

/// Doorkeeper slots per shard: four per entry the shard holds, 256 to 16 Ki (1 to 64 KiB).
fn doorkeeper_slots(shard_entries: usize) -> usize {
    shard_entries
        .saturating_mul(4)
        .clamp(256, 16384)
        .next_power_of_two()
}

/// The classifier the engine shares between all sessions: the [`FunctionPolicy`], the
/// [`Limits`], the decision cache (by text), and the per-database catalogues the host reports
/// (shared with the engine, so a replaced catalogue takes effect at once, cache and all).
pub struct Classifier {
    /// Unique per classifier (the local caches hold entries of several).
    id: u64,
    policy: FunctionPolicy,
    limits: Limits,
    catalogs: Arc<FunctionCatalogs>,
    shards: Box<[Mutex<Shard>]>,
    shard_entries: usize,
    shard_bytes: usize,
}

// Shared by every host thread.
const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Classifier>();
};

impl Classifier {
    /// A classifier caching up to `capacity` statement texts (0 disables the cache), with the
    /// default F-policy for these write functions and no catalogues. Key bytes are bounded too:
    /// about 512 per entry, at least 16 KiB per shard.
    pub fn new(write_functions: WriteFunctions, capacity: usize) -> Classifier {
        Classifier::with_limits(write_functions, capacity, Limits::DEFAULT)
    }

    /// As [`Classifier::new`], with explicit classification limits.
    pub fn with_limits(
        write_functions: WriteFunctions,
        capacity: usize,
        limits: Limits,
    ) -> Classifier {
        Classifier::with_policy(
            FunctionPolicy::new(write_functions),
            capacity,
            limits,
            Arc::new(FunctionCatalogs::new()),
        )
    }

    /// The full constructor: an F-policy and the catalogues to finish classifications against.
    pub fn with_policy(
        policy: FunctionPolicy,
        capacity: usize,
        limits: Limits,
        catalogs: Arc<FunctionCatalogs>,
    ) -> Classifier {
        policy.builtins().prepare();
        // Enough shards to keep host threads off each other's locks, each worth clearing.
        let nshards = (capacity / 64).clamp(1, SHARDS);
        let shard_entries = capacity.div_ceil(nshards);
        // Each shard can hold at least one maximal key.
        let shard_bytes = (shard_entries.saturating_mul(BYTES_PER_ENTRY)).max(MAX_CACHED_LEN);
        let shards = (0..nshards)
            .map(|_| {
                Mutex::new(Shard {
                    map: HashMap::default(),
                    bytes: 0,
                    texts_seen: Doorkeeper::new(doorkeeper_slots(shard_entries)),
                    shapes: HashMap::default(),
                    shape_bytes: 0,
                    shapes_seen: Doorkeeper::new(doorkeeper_slots(shard_entries)),
                    shape_hits: 0,
                })
            })
            .collect();
        Classifier {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            policy,
            limits,
            catalogs,
            shards,
            shard_entries,
            shard_bytes,
        }
    }

    pub fn write_functions(&self) -> &WriteFunctions {
        &self.policy.write_functions
    }

    pub fn policy(&self) -> &FunctionPolicy {
        &self.policy
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The per-database catalogues classifications are finished against.
    pub fn catalogs(&self) -> &Arc<FunctionCatalogs> {
        &self.catalogs
    }

    /// Classifies `sql` for a database whose catalogue is not known (see [`super::classify`]).
    pub fn classify(&self, sql: &str) -> Classification {
        self.policy.finish(self.classify_text(sql), None)
    }

    /// Classifies `sql` for a session connected to `database` (the startup packet's `database`):
    /// the text's classification, from the cache when it was seen before, finished against that
    /// database's reported catalogue (SPEC §7). Statements that call no function, or only
    /// built-ins of a database whose catalogue shadows none, pay nothing for the finish.
    pub fn classify_in(&self, database: &[u8], sql: &str) -> Classification {
        let c = self.classify_text(sql);
        let c = if !self.catalogs.needed_for(&c) {
            self.policy.finish(c, None)
        } else {
            let catalog = self.catalogs.get(database);
            self.policy.finish(c, catalog.as_deref())
        };
        if self.catalogs.is_changed(database) {
            return super::functions::keep_reads_off_replicas(c, NotSafe::CatalogChanged);
        }
        c
    }

    fn shard(&self, hash: u64) -> Option<&Mutex<Shard>> {
        // Bits 22.. choose the shard: away from the doorkeeper's positions (low bits, 42..).
        self.shards.get((hash >> 22) as usize % self.shards.len())
    }

    /// The text-only classification (cached): by exact text, then by shape; this thread's local
    /// slots first (a short text's shape is looked up there before the shared text table: a
    /// statement with a new literal then takes no lock), then the shared tables.
    fn classify_text(&self, sql: &str) -> Classification {
        // A text a client-only multibyte encoding may lex otherwise is judged by bytes that the
        // shape (which leaves literals and comments out) does not hold: never cached.
        if self.shard_entries == 0
            || sql.len() > MAX_CACHED_LEN
            || statement::encoding_ambiguous(sql)
        {
            return self.classify_uncached(sql);
        }
        let hash = text_hash(sql);
        // The shape is filled in place (`shaped`: whether it was scanned, and whether the text
        // has one), never moved.
        let mut shape = Shape::EMPTY;
        let mut shaped = None;
        // Lexing a long text costs more than a shared lookup: its shape comes after. (A long
        // text is never kept in the local slots.)
        if sql.len() <= LOCAL_MAX_LEN {
            match self.local(hash, sql, &mut shape) {
                Ok(c) => return c,
                Err(s) => shaped = s,
            }
        }
        let Some(shard) = self.shard(hash) else {
            return self.classify_uncached(sql);
        };
        let admit_text = {
            let mut s = shard.lock();
            if let Some(e) = s.map.get(&hash).filter(|e| &*e.text == sql) {
                let e = e.clone();
                drop(s);
                let c = e.class.clone();
                self.keep_local_text(hash, e);
                return c;
            }
            // Admitted on its second sighting only (see the module documentation).
            s.texts_seen.seen_before(hash)
        };
        let has_shape = match shaped {
            Some(s) => s,
            None => {
                let s = self.scan(sql, &mut shape);
                if s {
                    if let Some(c) = self.local_shape(&shape, sql) {
                        return c;
                    }
                }
                s
            }
        };
        let c = if has_shape {
            let sh = &shape;
            match self.shape_lookup(sh, sql) {
                Lookup::Hit(c) => c,
                Lookup::Miss { admit } => {
                    let (c, reads_text) =
                        statement::classify_str_ext(sql, self.policy.rules(), &self.limits);
                    // A verdict that read raw text (a DO body) depends on more than the shape.
                    if admit && !reads_text {
                        self.shape_insert(sh, sql, &c);
                    }
                    c
                }
            }
        } else {
            self.classify_uncached(sql)
        };
        if admit_text {
            let mut s = shard.lock();
            // Another text with the same hash keeps its slot (this one is classified each time).
            if !s.map.contains_key(&hash) {
                if s.map.len() >= self.shard_entries || s.bytes + sql.len() > self.shard_bytes {
                    s.map.clear();
                    s.bytes = 0;
                }
                s.map.insert(
                    hash,
                    Arc::new(TextEntry {
                        text: Box::from(sql),
                        class: c.clone(),
                    }),
                );
                s.bytes += sql.len();
            }
        }
        c
    }

    /// Whether `sql` has a shape (filled into `shape`); a text longer than the limit is too
    /// complex whatever its literals.
    fn scan(&self, sql: &str, shape: &mut Shape) -> bool {
        sql.len() <= self.limits.max_sql_len && shape.scan(sql)
    }

    /// This thread's local slots, in one visit: the text's slot, else (the text scanned for its
    /// shape meanwhile) the shape's. `Err`: a miss, with whether the shape was scanned and
    /// found (`None`: not scanned, the local slots being unavailable).
    fn local(
        &self,
        hash: u64,
        sql: &str,
        shape: &mut Shape,
    ) -> Result<Classification, Option<bool>> {
        LOCAL
            .try_with(|l| {
                let Ok(mut l) = l.try_borrow_mut() else {
                    return Err(None);
                };
                if let Some(slot) = l
                    .texts
                    .get(self.local_slot(hash, LOCAL_TEXTS))
                    .and_then(|s| s.as_ref())
                {
                    if slot.owner == self.id && slot.hash == hash && &*slot.entry.text == sql {
                        return Ok(slot.entry.class.clone());
                    }
                }
                let prefix = prefix_hash(sql);
                if let Some(p) = prefix {
                    if let Some(slot) = l
                        .guides
                        .get(self.local_slot(p, LOCAL_GUIDES))
                        .and_then(|s| s.as_ref())
                    {
                        if slot.owner == self.id
                            && slot.hash == p
                            && sql.len() <= self.limits.max_sql_len
                            && shape.scan_as(sql, &slot.entry.key, slot.entry.hash)
                        {
                            if let Some(c) = shape.restore(&slot.entry.class) {
                                count_local_hit(&mut l, self.id);
                                #[cfg(test)]
                                {
                                    l.guided += 1;
                                }
                                return Ok(c);
                            }
                        }
                    }
                }
                if !self.scan(sql, shape) {
                    return Err(Some(false));
                }
                match self.local_shape_in(&mut l, shape, sql, prefix) {
                    Some(c) => Ok(c),
                    None => Err(Some(true)),
                }
            })
            .unwrap_or(Err(None))
    }

    fn keep_local_text(&self, hash: u64, entry: Arc<TextEntry>) {
        if entry.text.len() > LOCAL_MAX_LEN {
            return;
        }
        let _ = LOCAL.try_with(|l| {
            if let Ok(mut l) = l.try_borrow_mut() {
                if let Some(slot) = l.texts.get_mut(self.local_slot(hash, LOCAL_TEXTS)) {
                    *slot = Some(LocalSlot {
                        owner: self.id,
                        hash,
                        entry,
                    });
                }
            }
        });
    }

    /// A hit in this thread's local shape slots.
    fn local_shape(&self, sh: &Shape, sql: &str) -> Option<Classification> {
        LOCAL
            .try_with(|l| {
                let mut l = l.try_borrow_mut().ok()?;
                self.local_shape_in(&mut l, sh, sql, prefix_hash(sql))
            })
            .ok()
            .flatten()
    }

    /// The local slot of a hash, among `slots`: bits 8.. (the shard takes 22.., the
    /// doorkeeper 0.. and 42..; a collision only misses), the classifier's id mixed in (the
    /// classifiers of one host thread do not take each other's slots for the same statements).
    fn local_slot(&self, hash: u64, slots: usize) -> usize {
        ((hash ^ self.id.wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> 8) as usize % slots
    }

    /// A hit in the local shape slots (`l`); the entry is then also kept as the guide for
    /// texts beginning as this one does (`prefix`).
    fn local_shape_in(
        &self,
        l: &mut Local,
        sh: &Shape,
        sql: &str,
        prefix: Option<u64>,
    ) -> Option<Classification> {
        let slot = l
            .shapes
            .get(self.local_slot(sh.hash, LOCAL_SHAPES))?
            .as_ref()?;
        if !(slot.owner == self.id && slot.hash == sh.hash && sh.matches(sql, &slot.entry.key)) {
            return None;
        }
        let c = sh.restore(&slot.entry.class)?;
        let entry = slot.entry.clone();
        count_local_hit(l, self.id);
        if let Some(p) = prefix.filter(|_| entry.guided) {
            if let Some(g) = l.guides.get_mut(self.local_slot(p, LOCAL_GUIDES)) {
                *g = Some(LocalSlot {
                    owner: self.id,
                    hash: p,
                    entry,
                });
            }
        }
        Some(c)
    }

    /// Keeps a shared shape entry in this thread's local slots, and as the guide for texts
    /// beginning as `sql` does.
    fn keep_local_shape(&self, hash: u64, entry: Arc<ShapeEntry>, sql: &str) {
        if entry.key.len() > LOCAL_MAX_LEN {
            return;
        }
        let _ = LOCAL.try_with(|l| {
            if let Ok(mut l) = l.try_borrow_mut() {
                if let Some(p) = prefix_hash(sql).filter(|_| entry.guided) {
                    if let Some(g) = l.guides.get_mut(self.local_slot(p, LOCAL_GUIDES)) {
                        *g = Some(LocalSlot {
                            owner: self.id,
                            hash: p,
                            entry: entry.clone(),
                        });
                    }
                }
                if let Some(slot) = l.shapes.get_mut(self.local_slot(hash, LOCAL_SHAPES)) {
                    *slot = Some(LocalSlot {
                        owner: self.id,
                        hash,
                        entry,
                    });
                }
            }
        });
    }

    /// The shared shape table (after this thread's local slots missed).
    fn shape_lookup(&self, sh: &Shape, sql: &str) -> Lookup {
        let Some(shard) = self.shard(sh.hash) else {
            return Lookup::Miss { admit: false };
        };
        let mut s = shard.lock();
        match s.shapes.get(&sh.hash) {
            Some(e) if sh.matches(sql, &e.key) => match sh.restore(&e.class) {
                Some(c) => {
                    let e = e.clone();
                    s.shape_hits += 1;
                    drop(s);
                    self.keep_local_shape(sh.hash, e, sql);
                    Lookup::Hit(c)
                }
                None => Lookup::Miss { admit: false },
            },
            // Another shape with the same hash holds the slot: this one is classified by text.
            Some(_) => Lookup::Miss { admit: false },
            None => Lookup::Miss {
                admit: s.shapes_seen.seen_before(sh.hash),
            },
        }
    }

    fn shape_insert(&self, sh: &Shape, sql: &str, c: &Classification) {
        let Some(stored) = sh.store(c) else {
            return;
        };
        let Some(shard) = self.shard(sh.hash) else {
            return;
        };
        let key = sh.key(sql);
        let mut s = shard.lock();
        if s.shapes.contains_key(&sh.hash) {
            return;
        }
        if s.shapes.len() >= self.shard_entries || s.shape_bytes + key.len() > self.shard_bytes {
            s.shapes.clear();
            s.shape_bytes = 0;
        }
        s.shape_bytes += key.len();
        let guided = key.len() >= GUIDE_PREFIX
            && key
                .get(..GUIDE_PREFIX)
                .is_some_and(|p| p.iter().all(|&b| b < 0xF8))
            && shape::guidable(&key);
        s.shapes.insert(
            sh.hash,
            Arc::new(ShapeEntry {
                key,
                class: stored,
                hash: sh.hash,
                guided,
            }),
        );
    }

    fn classify_uncached(&self, sql: &str) -> Classification {
        statement::classify_str(sql, self.policy.rules(), &self.limits)
    }

    /// Entries currently cached.
    pub fn cached_len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }

    /// Key bytes currently cached.
    pub fn cached_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().bytes).sum()
    }

    /// Shapes currently cached (statements that differ only in literals share one).
    pub fn cached_shapes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().shapes.len()).sum()
    }

    /// Classifications served by shape since the classifier was made: from the shared table,
    /// and from the calling thread's local slots (other threads' local hits are not counted).
    pub fn shape_hits(&self) -> u64 {
        let local = LOCAL
            .try_with(|l| {
                l.try_borrow().map_or(0, |l| {
                    l.shape_hits
                        .iter()
                        .find(|&&(o, _)| o == self.id)
                        .map_or(0, |&(_, n)| n)
                })
            })
            .unwrap_or(0);
        local + self.shards.iter().map(|s| s.lock().shape_hits).sum::<u64>()
    }

    /// Drops every cached entry.
    pub fn clear(&self) {
        for s in self.shards.iter() {
            let mut s = s.lock();
            s.map.clear();
            s.bytes = 0;
            s.texts_seen.clear();
            s.shapes.clear();
            s.shape_bytes = 0;
            s.shapes_seen.clear();
        }
    }
}

enum Lookup {
    Hit(Classification),
    /// `admit`: the shape was seen before and may be stored now.
    Miss {
        admit: bool,
    },
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier")
            .field("policy", &self.policy)
            .field("catalogs", &self.catalogs.len())
            .field("limits", &self.limits)
            .field("shards", &self.shards.len())
            .field("shard_entries", &self.shard_entries)
            .field("shard_bytes", &self.shard_bytes)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{classify, Kind};

    #[test]
    fn hit_equals_miss_and_bounds_hold() {
        let c = Classifier::new(WriteFunctions::defaults(), 100);
        let a = c.classify("SELECT 1");
        let b = c.classify("SELECT 1");
        assert_eq!(a, b);
        assert_eq!(a, classify("SELECT 1", &WriteFunctions::defaults()));
        assert_eq!(c.cached_len(), 1);
        for i in 0..1000 {
            let sql = format!("SELECT {i}; UPDATE t SET x = {i}");
            for _ in 0..3 {
                let got = c.classify(&sql);
                assert_eq!(got.count(), 2);
                assert_eq!(got.statements()[1].kind, Kind::Write);
                assert!(c.cached_len() <= 100);
            }
        }
        assert!(c.cached_len() > 0);
        c.clear();
        assert_eq!(c.cached_len(), 0);
        assert_eq!(c.cached_bytes(), 0);
    }

    #[test]
    fn byte_bound_holds_and_long_texts_are_not_cached() {
        let c = Classifier::new(WriteFunctions::defaults(), 4);
        let long = format!("SELECT '{}'", "x".repeat(MAX_CACHED_LEN));
        assert!(c.classify(&long).is_replica_safe());
        assert_eq!(c.cached_len(), 0);
        for i in 0..50 {
            let sql = format!("SELECT '{}' /* {i} */", "y".repeat(10_000));
            c.classify(&sql);
            c.classify(&sql);
            assert!(c.cached_bytes() <= MAX_CACHED_LEN);
            assert!(c.cached_bytes() >= 10_000, "a repeated text is cached");
        }
    }

    #[test]
    fn zero_capacity_disables_the_cache() {
        let c = Classifier::new(WriteFunctions::defaults(), 0);
        assert!(c.classify("SELECT 1").is_replica_safe());
        assert_eq!(c.cached_len(), 0);
    }

    #[test]
    fn many_shards_spread_keys() {
        let c = Classifier::new(WriteFunctions::defaults(), 64 * SHARDS);
        // Admitted on a second sighting; a third pass catches the few whose first mark the
        // doorkeeper lost to a later text. (Each its own shape: texts sharing one are served by
        // it, see the next tests.)
        for _ in 0..3 {
            for i in 0..500 {
                c.classify(&format!("SELECT abalance FROM pgbench_accounts_{i}"));
            }
        }
        assert_eq!(c.cached_len(), 500);
        let used = c.shards.iter().filter(|s| !s.lock().map.is_empty()).count();
        assert!(used >= SHARDS / 2, "only {used} shards used");
    }

    #[test]
    fn texts_seen_once_are_not_admitted_and_do_not_evict_the_repeating_ones() {
        let c = Classifier::new(WriteFunctions::defaults(), 64);
        let hot: Vec<String> = (0..20).map(|i| format!("SELECT * FROM t{i}")).collect();
        for _ in 0..2 {
            for sql in &hot {
                c.classify(sql);
            }
        }
        assert_eq!(c.cached_len(), hot.len());
        // pgbench-like texts, each with its own literal: classified right, never cached, and
        // the hot set survives them.
        for aid in 0..10_000 {
            let sql = format!("SELECT abalance FROM pgbench_accounts WHERE aid = {aid}");
            assert!(c.classify(&sql).is_replica_safe());
        }
        assert_eq!(c.cached_len(), hot.len());
        for sql in &hot {
            let shard = c
                .shards
                .iter()
                .find(|s| s.lock().map.values().any(|e| &*e.text == sql.as_str()));
            assert!(shard.is_some(), "{sql} was evicted");
        }
    }

    #[test]
    fn new_literals_are_served_along_the_guide_and_agree_with_the_full_classification() {
        // Several classifiers used in turn on one thread (their guides must not get in each
        // other's way), each served along its own guide.
        let cs: Vec<Classifier> = (0..3)
            .map(|_| Classifier::new(WriteFunctions::defaults(), 64))
            .collect();
        let guided = || LOCAL.with(|l| l.borrow().guided);
        let before = guided();
        for (template, kind) in [
            (
                "SELECT abalance FROM pgbench_accounts WHERE aid = {}",
                "read",
            ),
            (
                "UPDATE pgbench_accounts SET abalance = abalance + {} WHERE aid = 7",
                "write",
            ),
            (
                "SELECT * FROM accounts WHERE id = {} FOR UPDATE",
                "locking read",
            ),
            ("SET search_path = '{}'", "set"),
        ] {
            for i in 0..600u32 {
                let c = &cs[(i % 3) as usize];
                let sql = template.replace("{}", &(i * 7919).to_string());
                let got = c.classify(&sql);
                assert_eq!(got, classify(&sql, &WriteFunctions::defaults()), "{sql}");
                let k = match got.first().kind {
                    Kind::Read => "read",
                    Kind::ReadNotSafe => "locking read",
                    Kind::Write => "write",
                    Kind::Set { .. } => "set",
                    _ => "other",
                };
                assert_eq!(k, kind, "{sql}");
            }
        }
        // All but the first few of each statement (seen, stored, kept locally, guided).
        assert!(guided() - before > 4 * 570, "{}", guided() - before);
    }
}
