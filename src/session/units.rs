//! The queue of decided units in flight, oldest first, with what the per-message path asks of
//! it answered in O(1): a unit by its id, and whether any unit is of a kind that makes a new
//! one wait (`must_wait`), may open a transaction block, runs on a reader or may drop every
//! prepared statement. A client that pipelines thousands of statements to the writer has as
//! many units queued; a scan of the queue for each new statement made its session quadratic and
//! stalled every other client of the host's event loop for seconds (a prober's finding,
//! 2026-12-05).
//!
//! The counts cost an idle session nothing (issue 20: ≤ 2 KiB): they live in a box made only
//! once the queue holds [`COUNT_FROM`] units (counted then with one scan) and dropped when it
//! runs empty; a shorter queue is scanned, as it always was. While they exist they are kept
//! exact by construction: every change to a unit goes through this type — [`Units::get_mut`]
//! and [`Units::at_mut`] note which unit they hand out, and it is counted again before anything
//! else changes (the answers count it as it is now) — and read-only access is the `VecDeque`'s
//! own (`Deref`).

use std::collections::VecDeque;
use std::ops::Deref;

use super::{Attempt, Unit, UnitKind};
use crate::classify::{Classification, Kind};

/// What a unit counts for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Marks {
    /// Not a writer unit a later writer unit may be pipelined behind (`Session::must_wait`).
    blocks: bool,
    /// May leave a transaction block open (`Unit::may_open_txn`).
    may_open_txn: bool,
    /// Runs on a reader or waits for one.
    on_reader: bool,
    /// A Query that may drop every prepared statement (`DEALLOCATE ALL`, `DISCARD ALL`, or
    /// text the engine could not classify).
    clears_statements: bool,
    /// A writer unit that may be in COPY IN or enter it ([`may_copy_in`]).
    may_copy_in: bool,
}

fn blocks(u: &Unit) -> bool {
    u.attempt != Attempt::Writer
        || u.open
        || u.check_then.is_some()
        // A `BEGIN` cut off a batch: the rest is decided inside its block.
        || u.hidden_sync
}

fn may_open_txn(u: &Unit) -> bool {
    u.may_open_txn
}

/// A writer unit that may be in COPY IN or enter it: one the writer put in COPY IN, a Query
/// the engine could not read or with a `COPY`, a batch with an Execute of one or of something
/// unknown. Hidden work with a Sync of its own must not reach the server behind it: the server
/// would read it as COPY data (`Session::writer_takes_hidden_sync`).
pub(super) fn may_copy_in(u: &Unit) -> bool {
    let copies = |c: &Option<Classification>| {
        c.as_ref()
            .is_none_or(|c| c.statements().iter().any(|s| s.kind == Kind::Copy))
    };
    u.attempt == Attempt::Writer
        && (u.copy_in
            || match u.kind {
                UnitKind::Query => copies(&u.class),
                UnitKind::Batch => u.execs.iter().any(copies),
                UnitKind::FunctionCall => false,
            })
}

fn on_reader(u: &Unit) -> bool {
    matches!(
        u.attempt,
        Attempt::Reader { .. } | Attempt::AwaitReader { .. }
    )
}

/// A Query that drops every prepared statement (`DEALLOCATE ALL`, `DISCARD ALL`), or one the
/// engine could not classify (E-2).
pub(super) fn clears_statements(u: &Unit) -> bool {
    u.kind == UnitKind::Query && u.class.as_ref().is_none_or(drops_statements)
}

/// Whether `c` drops every prepared statement of the connection it runs on (`DEALLOCATE ALL`,
/// `DISCARD ALL`).
pub(super) fn drops_statements(c: &Classification) -> bool {
    c.statements().iter().any(|s| {
        matches!(
            s.kind,
            Kind::Deallocate { all: true } | Kind::Discard(crate::classify::DiscardWhat::All)
        )
    })
}

impl Marks {
    fn of(u: &Unit) -> Marks {
        Marks {
            blocks: blocks(u),
            may_open_txn: may_open_txn(u),
            on_reader: on_reader(u),
            clears_statements: clears_statements(u),
            may_copy_in: may_copy_in(u),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    blocks: usize,
    may_open_txn: usize,
    on_reader: usize,
    clears_statements: usize,
    may_copy_in: usize,
}

impl Counts {
    fn add(&mut self, m: Marks) {
        self.blocks += usize::from(m.blocks);
        self.may_open_txn += usize::from(m.may_open_txn);
        self.on_reader += usize::from(m.on_reader);
        self.clears_statements += usize::from(m.clears_statements);
        self.may_copy_in += usize::from(m.may_copy_in);
    }

    fn sub(&mut self, m: Marks) {
        self.blocks -= usize::from(m.blocks);
        self.may_open_txn -= usize::from(m.may_open_txn);
        self.on_reader -= usize::from(m.on_reader);
        self.clears_statements -= usize::from(m.clears_statements);
        self.may_copy_in -= usize::from(m.may_copy_in);
    }
}

/// Decided units in flight, oldest first. Their ids increase along the queue (they are taken
/// from `Session::new_unit_id` as they are pushed at the back, 0 skipped when the counter
/// wraps), so a unit is found by its distance from the front's id.
#[derive(Debug, Default)]
pub(super) struct Units {
    q: VecDeque<Unit>,
    /// The counts, while the queue is long (made when it reaches [`COUNT_FROM`] units, dropped
    /// when it runs empty): `None` means fewer than [`COUNT_FROM`] units, scanned instead.
    counted: Option<Box<Counted>>,
}

/// The marks of a long queue's units, counted.
#[derive(Debug)]
struct Counted {
    /// The marks of the queue's units, but for `changing`'s unit: as it was counted.
    counts: Counts,
    /// The unit last handed out to be changed (its index) and its marks then: it is counted
    /// again before the queue changes or another unit is handed out, and the answers in
    /// between count it as it is now.
    changing: Option<(usize, Marks)>,
}

/// A queue this long is counted rather than scanned: a scan of fewer units costs about what
/// keeping the counts does, and an idle session (one unit at most) holds no box for them.
const COUNT_FROM: usize = 32;

/// Unit ids run 1..=u32::MAX and wrap to 1: this many distinct values.
const ID_SPACE: u64 = u32::MAX as u64;

/// Debug builds check lookups and counts against a scan of queues up to this long (a longer
/// one would make the checks quadratic).
#[cfg(debug_assertions)]
const DEBUG_CHECK_MAX: usize = 256;

/// How many ids after `from` comes `to`, in the order ids are handed out.
fn distance(from: u32, to: u32) -> u64 {
    (u64::from(to) + ID_SPACE - u64::from(from)) % ID_SPACE
}

impl Deref for Units {
    type Target = VecDeque<Unit>;

    fn deref(&self) -> &VecDeque<Unit> {
        &self.q
    }
}

impl Counted {
    /// Counts the unit last handed out to be changed as it is now.
    fn settle(&mut self, q: &VecDeque<Unit>) {
        if let Some((i, before)) = self.changing.take() {
            if let Some(u) = q.get(i) {
                self.counts.sub(before);
                self.counts.add(Marks::of(u));
            }
        }
    }

    /// The counts of `q` as it is now.
    fn now(&self, q: &VecDeque<Unit>) -> Counts {
        let mut c = self.counts;
        if let Some((i, before)) = self.changing {
            if let Some(u) = q.get(i) {
                c.sub(before);
                c.add(Marks::of(u));
            }
        }
        #[cfg(debug_assertions)]
        if q.len() <= DEBUG_CHECK_MAX {
            let mut all = Counts::default();
            for u in q {
                all.add(Marks::of(u));
            }
            debug_assert_eq!(all, c);
        }
        c
    }
}

impl Units {
    pub(super) fn push_back(&mut self, u: Unit) {
        debug_assert!(self.q.back().is_none_or(|b| distance(b.id, u.id) > 0));
        // Room for one more element, exactly one on first use (a plain `push_back` would
        // allocate four: the queue holds one unit almost always).
        if self.q.capacity() == 0 {
            self.q.reserve_exact(1);
        }
        if let Some(c) = self.counted.as_deref_mut() {
            c.settle(&self.q);
            c.counts.add(Marks::of(&u));
        }
        self.q.push_back(u);
        if self.counted.is_none() && self.q.len() >= COUNT_FROM {
            // Long now: counted from here on, starting with one scan.
            let mut counts = Counts::default();
            for u in &self.q {
                counts.add(Marks::of(u));
            }
            self.counted = Some(Box::new(Counted {
                counts,
                changing: None,
            }));
        }
    }

    /// Removes the unit at `pos`.
    pub(super) fn remove(&mut self, pos: usize) -> Option<Unit> {
        if let Some(c) = self.counted.as_deref_mut() {
            c.settle(&self.q);
        }
        let u = self.q.remove(pos)?;
        if self.q.is_empty() {
            // Short again: the next long queue is counted afresh.
            self.counted = None;
        } else if let Some(c) = self.counted.as_deref_mut() {
            c.counts.sub(Marks::of(&u));
        }
        Some(u)
    }

    pub(super) fn clear(&mut self) {
        self.q.clear();
        self.counted = None;
    }

    /// Where unit `id` is in the queue.
    #[inline]
    pub(super) fn position(&self, id: u32) -> Option<usize> {
        let found = self.find(id);
        #[cfg(debug_assertions)]
        if self.q.len() <= DEBUG_CHECK_MAX {
            debug_assert_eq!(found, self.q.iter().position(|u| u.id == id));
        }
        found
    }

    #[inline]
    fn find(&self, id: u32) -> Option<usize> {
        // The common case (one unit at a time, or the head's own): no arithmetic.
        match self.q.front() {
            Some(u) if u.id == id && id != 0 => Some(0),
            Some(u) if id != 0 => self.find_behind(u.id, id),
            _ => None,
        }
    }

    /// [`Self::find`] past the front.
    #[inline(never)]
    fn find_behind(&self, front: u32, id: u32) -> Option<usize> {
        let d = distance(front, id);
        // No unit left the queue but from its front: the unit is `d` places in.
        if let Some(i) = usize::try_from(d).ok().filter(|&i| i < self.q.len()) {
            if self.q.get(i).is_some_and(|u| u.id == id) {
                return Some(i);
            }
        }
        // Some left from the middle (a unit finished out of turn): ids still increase.
        let i = self.q.partition_point(|u| distance(front, u.id) < d);
        self.q.get(i).is_some_and(|u| u.id == id).then_some(i)
    }

    /// Unit `id`.
    #[inline]
    pub(super) fn get(&self, id: u32) -> Option<&Unit> {
        match self.q.front() {
            Some(u) if u.id == id && id != 0 => Some(u),
            _ => self.position(id).and_then(|i| self.q.get(i)),
        }
    }

    /// Unit `id`, to change.
    #[inline]
    pub(super) fn get_mut(&mut self, id: u32) -> Option<&mut Unit> {
        let i = self.position(id)?;
        Some(self.at_mut(i))
    }

    /// The unit at `pos`, to change (panics when there is none, as indexing does).
    pub(super) fn at_mut(&mut self, pos: usize) -> &mut Unit {
        if let Some(c) = self.counted.as_deref_mut() {
            c.settle(&self.q);
            c.changing = Some((pos, Marks::of(&self.q[pos])));
        }
        &mut self.q[pos]
    }

    /// Every unit's extras, to change (nothing counted is in them).
    pub(super) fn extras_mut(&mut self) -> impl Iterator<Item = &mut super::UnitExtra> {
        self.q.iter_mut().filter_map(|u| u.extra.as_deref_mut())
    }

    /// Whether some unit is marked `mark` (`count`: its count), counted or scanned.
    fn any(&self, count: fn(&Counts) -> usize, mark: fn(&Unit) -> bool) -> bool {
        match self.counted.as_deref() {
            Some(c) => count(&c.now(&self.q)) > 0,
            None => {
                debug_assert!(self.q.len() < COUNT_FROM);
                self.q.iter().any(mark)
            }
        }
    }

    /// Whether some unit may not have a later writer unit pipelined behind it: not on the
    /// writer, an open batch, waiting for a row-shape check, or cut off by a `BEGIN`.
    pub(super) fn any_blocking(&self) -> bool {
        self.any(|c| c.blocks, blocks)
    }

    /// Whether some unit may leave a transaction block open.
    pub(super) fn any_may_open_txn(&self) -> bool {
        self.any(|c| c.may_open_txn, may_open_txn)
    }

    /// Whether some unit runs on a reader or waits for one.
    pub(super) fn any_on_reader(&self) -> bool {
        self.any(|c| c.on_reader, on_reader)
    }

    /// How many writer units may be in COPY IN or enter it ([`may_copy_in`]).
    pub(super) fn count_may_copy_in(&self) -> usize {
        match self.counted.as_deref() {
            Some(c) => c.now(&self.q).may_copy_in,
            None => self.q.iter().filter(|u| may_copy_in(u)).count(),
        }
    }

    /// Whether some unit is a Query that may drop every prepared statement.
    pub(super) fn any_clearing_statements(&self) -> bool {
        self.any(|c| c.clears_statements, clears_statements)
    }
}
