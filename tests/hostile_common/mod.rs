//! Shared by the `hostile_*` and `isolation_*` test binaries: a counting global allocator (bytes
//! live, peak, allocation count — per thread, so parallel tests do not disturb each other; and,
//! on request, a registry of live blocks whose contents a test can scan), and a lean host that
//! drives a session without copying any byte it forwards.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use polarsplit::session::{Action, ClientInfo, ConnId, Event, Session, SessionError};
use polarsplit::{Config, Engine};

pub struct Counting;

thread_local! {
    static CUR: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static TRACKED: Cell<bool> = const { Cell::new(false) };
}

/// Live blocks allocated by the tracking thread: (address, size) pairs, 0 = free slot.
const SLOTS: usize = 1 << 16;
static BLOCKS: [AtomicUsize; 2 * SLOTS] = [const { AtomicUsize::new(0) }; 2 * SLOTS];
static BLOCKS_LOCK: AtomicBool = AtomicBool::new(false);
static BLOCKS_OVERFLOW: AtomicBool = AtomicBool::new(false);

fn with_blocks(f: impl FnOnce()) {
    while BLOCKS_LOCK
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
    f();
    BLOCKS_LOCK.store(false, Ordering::Release);
}

fn track_add(p: usize, size: usize) {
    with_blocks(|| {
        for i in 0..SLOTS {
            if BLOCKS[2 * i].load(Ordering::Relaxed) == 0 {
                BLOCKS[2 * i].store(p, Ordering::Relaxed);
                BLOCKS[2 * i + 1].store(size, Ordering::Relaxed);
                return;
            }
        }
        BLOCKS_OVERFLOW.store(true, Ordering::Relaxed);
    });
}

fn track_remove(p: usize) {
    with_blocks(|| {
        for i in 0..SLOTS {
            if BLOCKS[2 * i].load(Ordering::Relaxed) == p {
                BLOCKS[2 * i].store(0, Ordering::Relaxed);
                return;
            }
        }
    });
}

fn on_alloc(p: *mut u8, size: usize) {
    let _ = CUR.try_with(|c| {
        let v = c.get() + size as isize;
        c.set(v);
        let _ = PEAK.try_with(|pk| pk.set(pk.get().max(v)));
    });
    let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
    if TRACKED.try_with(|t| t.get()).unwrap_or(false) {
        track_add(p as usize, size);
    }
}

fn on_dealloc(p: *mut u8, size: usize) {
    let _ = CUR.try_with(|c| c.set(c.get() - size as isize));
    if TRACKED.try_with(|t| t.get()).unwrap_or(false) {
        track_remove(p as usize);
    }
}

// SAFETY: delegates to the system allocator; the bookkeeping never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            on_alloc(p, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            on_alloc(p, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        on_dealloc(p, layout.size());
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(p, layout) }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            on_dealloc(p, layout.size());
            on_alloc(q, new_size);
        }
        q
    }
}

/// Bytes this thread has allocated and not freed.
pub fn live_bytes() -> isize {
    CUR.with(|c| c.get())
}

/// Allocations this thread has made.
pub fn allocations() -> u64 {
    ALLOCS.with(|a| a.get())
}

/// Runs `f` and reports the peak of this thread's live heap above its level at the start, and
/// the number of allocations `f` made.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize, u64) {
    let start = live_bytes();
    PEAK.with(|p| p.set(start));
    let a0 = allocations();
    let r = f();
    let peak = PEAK.with(|p| p.get()) - start;
    (r, peak.max(0) as usize, allocations() - a0)
}

/// Records every block this thread allocates from now on (one thread at a time per binary).
pub fn start_tracking() {
    with_blocks(|| {
        for b in BLOCKS.iter() {
            b.store(0, Ordering::Relaxed);
        }
    });
    BLOCKS_OVERFLOW.store(false, Ordering::Relaxed);
    TRACKED.with(|t| t.set(true));
}

pub fn stop_tracking() {
    TRACKED.with(|t| t.set(false));
}

/// Whether any live block allocated since `start_tracking` contains `needle` anywhere in its
/// whole allocated size (stale bytes of cleared buffers included). Returns the number of blocks
/// scanned, or the size of the block that holds it.
pub fn heap_contains(needle: &[u8]) -> Result<usize, usize> {
    assert!(
        !BLOCKS_OVERFLOW.load(Ordering::Relaxed),
        "more live blocks than the registry holds"
    );
    let mut blocks = Vec::new();
    let was = TRACKED.with(|t| t.replace(false));
    with_blocks(|| {
        for i in 0..SLOTS {
            let p = BLOCKS[2 * i].load(Ordering::Relaxed);
            if p != 0 {
                blocks.push((p, BLOCKS[2 * i + 1].load(Ordering::Relaxed)));
            }
        }
    });
    let mut copy = Vec::new();
    for &(p, size) in &blocks {
        if size < needle.len() {
            continue;
        }
        copy.clear();
        // SAFETY: a live block of `size` bytes this thread allocated; volatile byte reads (it may
        // hold bytes never written, or stale bytes of a cleared buffer — exactly what we look for).
        copy.extend((0..size).map(|k| unsafe { std::ptr::read_volatile((p + k) as *const u8) }));
        if contains(&copy, needle) {
            TRACKED.with(|t| t.set(was));
            return Err(size);
        }
    }
    TRACKED.with(|t| t.set(was));
    Ok(blocks.len())
}

pub const WRITER: ConnId = 100;

/// What the lean host keeps of the actions: counts, decisions, and (with `copy`) the bytes the
/// engine built.
#[derive(Debug, Default)]
pub struct Seen {
    pub client_fwd: BTreeMap<ConnId, u64>,
    pub client_drop: u64,
    pub backend_fwd: BTreeMap<ConnId, u64>,
    pub backend_drop: BTreeMap<ConnId, u64>,
    pub send_backend: Vec<(ConnId, Vec<u8>)>,
    pub send_client: Vec<u8>,
    pub acquire: Option<u32>,
    pub decisions: Vec<polarsplit::session::Decision>,
    pub releases: Vec<ConnId>,
    pub closes: Vec<ConnId>,
    pub close_client: bool,
    pub actions: usize,
}

/// A host that drives a session by counts only: it never holds the bytes it forwards, so the
/// memory a test measures is the engine's. With `copy` off it copies no byte at all (decisions
/// are small plain values and are always kept).
pub struct Lean {
    /// Byte strings no action may carry (checked on the borrowed bytes, never copied).
    pub forbid: Vec<&'static [u8]>,
    pub forbidden_seen: usize,
    pub engine: Arc<Engine>,
    pub session: Session,
    pub now: u64,
    pub copy: bool,
    pub seen: Seen,
    pub client_fed: u64,
    pub backend_fed: BTreeMap<ConnId, u64>,
}

impl Lean {
    pub fn new(c: Config) -> Lean {
        let engine = Engine::new(c);
        engine.add_reader(1, 1);
        engine.add_reader(2, 1);
        let session = Session::new(
            engine.clone(),
            ClientInfo {
                client_addr: Some(("10.0.0.7".into(), 40000)),
                proxy_addr: Some(("127.0.0.1".into(), 6432)),
                writer_hostgroup: None,
            },
        );
        Lean {
            forbid: Vec::new(),
            forbidden_seen: 0,
            engine,
            session,
            now: 1_000,
            copy: true,
            seen: Seen::default(),
            client_fed: 0,
            backend_fed: BTreeMap::new(),
        }
    }

    pub fn drain(&mut self) {
        while let Some(a) = self.session.poll_action() {
            let bytes: &[u8] = match a {
                Action::SendBackend { bytes, .. } | Action::SendClient { bytes } => bytes,
                Action::ConnectWriter { startup } | Action::AcquireReader { startup, .. } => {
                    startup
                }
                Action::CancelRequest { secret, .. } => secret,
                _ => &[],
            };
            if self.forbid.iter().any(|f| contains(bytes, f)) {
                self.forbidden_seen += 1;
            }
            let s = &mut self.seen;
            s.actions += 1;
            match a {
                Action::ForwardClient { conn, n } => {
                    *s.client_fwd.entry(conn).or_default() += n as u64
                }
                Action::DiscardClient { n } => s.client_drop += n as u64,
                Action::ForwardBackend { conn, n } => {
                    *s.backend_fwd.entry(conn).or_default() += n as u64
                }
                Action::DiscardBackend { conn, n } => {
                    *s.backend_drop.entry(conn).or_default() += n as u64
                }
                Action::SendBackend { conn, bytes } if self.copy => {
                    s.send_backend.push((conn, bytes.to_vec()))
                }
                Action::SendClient { bytes } if self.copy => s.send_client.extend_from_slice(bytes),
                Action::AcquireReader { server, .. } => s.acquire = Some(server),
                Action::Decision(d) => s.decisions.push(d),
                Action::ReleaseReader { conn, .. } => s.releases.push(conn),
                Action::CloseBackend { conn } => s.closes.push(conn),
                Action::CloseClient => s.close_client = true,
                _ => {}
            }
        }
    }

    /// Feeds client bytes; returns how many the session took.
    pub fn client(&mut self, bytes: &[u8]) -> Result<usize, SessionError> {
        let r = self.session.recv_client(bytes, self.now);
        if let Ok(n) = r {
            self.client_fed += n as u64;
        }
        self.drain();
        r
    }

    pub fn backend(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SessionError> {
        let r = self.session.recv_backend(conn, bytes, self.now);
        if r.is_ok() || matches!(r, Err(SessionError::Protocol { .. })) {
            *self.backend_fed.entry(conn).or_default() += bytes.len() as u64;
        }
        self.drain();
        r
    }

    pub fn event(&mut self, conn: ConnId, e: Event) -> Result<(), SessionError> {
        let r = self.session.on_backend_event(conn, e, self.now);
        self.drain();
        r
    }

    /// Startup, writer connected, trust auth, first RFQ with an LSN.
    pub fn connect(&mut self) {
        self.client(&startup()).expect("startup");
        self.event(WRITER, Event::WriterConnected).expect("writer");
        let mut b = msg(b'R', &0i32.to_be_bytes());
        b.extend(msg(b'K', &[0, 0, 0, 7, 0, 0, 0, 8]));
        b.extend(rfq(b'I', Some(0x1000), None));
        self.backend(WRITER, &b).expect("auth");
    }

    /// Client bytes acted on (forwarded anywhere + discarded).
    pub fn client_acted(&self) -> u64 {
        self.seen.client_fwd.values().sum::<u64>() + self.seen.client_drop
    }

    pub fn backend_acted(&self, conn: ConnId) -> u64 {
        self.seen.backend_fwd.get(&conn).copied().unwrap_or(0)
            + self.seen.backend_drop.get(&conn).copied().unwrap_or(0)
    }
}

pub fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    v.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    v.extend_from_slice(body);
    v
}

pub fn query(sql: &[u8]) -> Vec<u8> {
    let mut b = sql.to_vec();
    b.push(0);
    msg(b'Q', &b)
}

pub fn startup() -> Vec<u8> {
    let mut body = 196_608u32.to_be_bytes().to_vec();
    body.extend_from_slice(b"user\0app\0database\0db\0\0");
    let mut v = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    v.extend(body);
    v
}

pub fn rfq(status: u8, lsn: Option<u64>, xact: Option<(u8, &[u8])>) -> Vec<u8> {
    let mut b = vec![status];
    if let Some(l) = lsn {
        b.extend_from_slice(&l.to_be_bytes());
    }
    if let Some((m, x)) = xact {
        b.push(m);
        b.extend_from_slice(x);
        b.push(0);
    }
    msg(b'Z', &b)
}

pub fn command_complete(tag: &str) -> Vec<u8> {
    msg(b'C', format!("{tag}\0").as_bytes())
}

pub fn data_row(value: &[u8]) -> Vec<u8> {
    let mut b = 1u16.to_be_bytes().to_vec();
    b.extend_from_slice(&(value.len() as i32).to_be_bytes());
    b.extend_from_slice(value);
    msg(b'D', &b)
}

pub fn row_description() -> Vec<u8> {
    let mut b = 1u16.to_be_bytes().to_vec();
    b.extend_from_slice(b"v\0");
    b.extend_from_slice(&[0; 18]);
    msg(b'T', &b)
}

/// Whether `hay` contains `needle`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}
