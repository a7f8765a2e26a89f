//! Isolation of secrets (issue 10): the engine keeps no byte of a PasswordMessage or of a SASL
//! exchange, and what it records of startup and authentication is only what routing needs.
//!
//! Proof by inspection of everything the engine has: every block it allocated (their whole
//! allocated size, so stale bytes of cleared buffers count too) is scanned for recognisable
//! secrets after the exchange, as are every action's bytes (on the borrowed bytes, without
//! copying them), the session's `Debug` output and its error text. The secrets themselves live
//! in read-only data and on the stack, never in a heap block of their own.

mod hostile_common;

use std::sync::Mutex;

use hostile_common::{
    command_complete, contains, heap_contains, msg, query, rfq, start_tracking, startup,
    stop_tracking, Counting, Lean, WRITER,
};
use polarsplit::{Event, SessionError};

#[global_allocator]
static ALLOC: Counting = Counting;

/// One test at a time tracks blocks (the registry is global to the binary).
static TRACKING: Mutex<()> = Mutex::new(());

const PASSWORD: &[u8] = b"hunter2-Pa55w0rd-7f3a9c";
const MD5: &[u8] = b"md5a3556571e93b0d20722ba62be61e8c2d";
const CLIENT_NONCE: &[u8] = b"rOprNGfwEbeRWgbNEkqO-cnonce";
const SALT: &[u8] = b"W22ZaJ0SNY7soEsUEjb6gQ==";
const PROOF: &[u8] = b"dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const SIGNATURE: &[u8] = b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
const ALL: &[&[u8]] = &[PASSWORD, MD5, CLIENT_NONCE, SALT, PROOF, SIGNATURE];

/// A protocol message built on the stack (so the test holds no heap copy of a secret).
struct StackMsg {
    buf: [u8; 512],
    len: usize,
}

impl StackMsg {
    fn new(tag: u8, parts: &[&[u8]]) -> StackMsg {
        let mut m = StackMsg {
            buf: [0; 512],
            len: 5,
        };
        m.buf[0] = tag;
        for p in parts {
            m.buf[m.len..m.len + p.len()].copy_from_slice(p);
            m.len += p.len();
        }
        let l = (m.len - 1) as u32;
        m.buf[1..5].copy_from_slice(&l.to_be_bytes());
        m
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

fn auth_request(code: i32, data: &[&[u8]]) -> StackMsg {
    let c = code.to_be_bytes();
    let mut parts: Vec<&[u8]> = vec![&c];
    parts.extend_from_slice(data);
    StackMsg::new(b'R', &parts)
}

/// Feeds a message to the writer in 3-byte pieces: the engine's framer must reassemble it, which
/// is exactly when a copy could linger.
fn backend_in_pieces(l: &mut Lean, m: &StackMsg) {
    for p in m.bytes().chunks(3) {
        l.backend(WRITER, p).expect("backend bytes");
    }
}

fn client_in_pieces(l: &mut Lean, m: &StackMsg) {
    for p in m.bytes().chunks(3) {
        assert_eq!(l.client(p).expect("client bytes"), p.len());
    }
}

fn authenticated(l: &mut Lean) {
    let mut b = msg(b'R', &0i32.to_be_bytes());
    b.extend(msg(b'K', &[0, 0, 0, 7, 0, 0, 0, 8]));
    b.extend(rfq(b'I', Some(0x1000), None));
    l.backend(WRITER, &b).expect("auth ok");
    l.writer_answers_startup_capture();
    // Life goes on: a write and a read on a reader.
    l.client(&query(b"INSERT INTO t VALUES (1)")).unwrap();
    let mut b = command_complete("INSERT 0 1");
    b.extend(rfq(b'I', Some(0x2000), None));
    l.backend(WRITER, &b).unwrap();
    l.client(&query(b"SELECT v FROM t")).unwrap();
    let server = l.seen.acquire.expect("a read on a reader");
    l.event(
        301,
        Event::ReaderAttached {
            server,
            fresh: true,
            needs_reset: false,
        },
    )
    .unwrap();
}

/// Scans everything the engine holds or emitted for every secret.
fn assert_nothing_kept(l: &Lean, what: &str) {
    assert_eq!(l.forbidden_seen, 0, "{what}: an action carried a secret");
    for s in ALL {
        match heap_contains(s) {
            Ok(blocks) => assert!(blocks > 10, "{what}: scanned only {blocks} blocks"),
            Err(size) => panic!(
                "{what}: a live {size}-byte block holds {:?}",
                String::from_utf8_lossy(s)
            ),
        }
    }
    stop_tracking();
    let debug = format!("{:?}", l.session);
    let engine = format!("{:?}", l.engine);
    for s in ALL {
        // As text, and as `Debug` prints byte vectors ("104, 117, …").
        let text = std::str::from_utf8(s).unwrap();
        let list = debug_bytes(s);
        for shown in [&debug, &engine] {
            assert!(
                !shown.contains(text) && !shown.contains(&list),
                "{what}: Debug shows {text}"
            );
        }
        assert!(!l.session.last_error().contains(text));
    }
    // What the session does record of the startup is what routing needs: user and database
    // (the reader key), the parameters (to open backends for this client).
    assert!(debug.contains(&debug_bytes(b"app")));
}

/// How `Debug` shows these bytes inside a byte vector.
fn debug_bytes(b: &[u8]) -> String {
    let s = format!("{b:?}");
    s[1..s.len() - 1].to_string()
}

fn lean() -> Lean {
    let mut l = Lean::new(polarsplit_test_support::default_config());
    l.copy = false;
    l.forbid = ALL.to_vec();
    l
}

#[test]
fn a_cleartext_password_leaves_no_trace() {
    let _g = TRACKING.lock().unwrap_or_else(|e| e.into_inner());
    start_tracking();
    let mut l = lean();
    l.client(&startup()).unwrap();
    l.event(WRITER, Event::WriterConnected).unwrap();
    backend_in_pieces(&mut l, &auth_request(3, &[]));
    client_in_pieces(&mut l, &StackMsg::new(b'p', &[PASSWORD, b"\0"]));
    // All of it went to the writer, by count.
    assert_eq!(l.seen.client_fwd[&WRITER], (PASSWORD.len() + 6) as u64);
    authenticated(&mut l);
    assert_nothing_kept(&l, "cleartext");
}

#[test]
fn a_password_sent_before_the_writer_is_connected_leaves_no_trace() {
    let _g = TRACKING.lock().unwrap_or_else(|e| e.into_inner());
    start_tracking();
    let mut l = lean();
    let p = StackMsg::new(b'p', &[MD5, b"\0"]);
    // Startup and the password pipelined in one read, before the writer exists.
    let mut both = [0u8; 600];
    let s = startup();
    both[..s.len()].copy_from_slice(&s);
    both[s.len()..s.len() + p.len].copy_from_slice(p.bytes());
    let n = l.client(&both[..s.len() + p.len]).unwrap();
    assert_eq!(n, s.len() + p.len);
    // Scrub the test's own copy: only the engine's memory is under test.
    both.fill(0);
    l.event(WRITER, Event::WriterConnected).unwrap();
    backend_in_pieces(&mut l, &auth_request(5, &[&[1, 2, 3, 4]]));
    authenticated(&mut l);
    assert_nothing_kept(&l, "md5, pipelined");
}

#[test]
fn a_scram_exchange_leaves_no_trace() {
    let _g = TRACKING.lock().unwrap_or_else(|e| e.into_inner());
    start_tracking();
    let mut l = lean();
    l.client(&startup()).unwrap();
    l.event(WRITER, Event::WriterConnected).unwrap();
    backend_in_pieces(&mut l, &auth_request(10, &[b"SCRAM-SHA-256\0\0"]));
    // SASLInitialResponse: mechanism, length, client-first-message.
    let first_len = (8 + CLIENT_NONCE.len()) as i32;
    client_in_pieces(
        &mut l,
        &StackMsg::new(
            b'p',
            &[
                b"SCRAM-SHA-256\0",
                &first_len.to_be_bytes(),
                b"n,,n=,r=",
                CLIENT_NONCE,
            ],
        ),
    );
    // AuthenticationSASLContinue: server-first-message.
    backend_in_pieces(
        &mut l,
        &auth_request(11, &[b"r=", CLIENT_NONCE, b"srvnonce,s=", SALT, b",i=4096"]),
    );
    // SASLResponse: client-final-message with the proof.
    client_in_pieces(
        &mut l,
        &StackMsg::new(b'p', &[b"c=biws,r=", CLIENT_NONCE, b"srvnonce,p=", PROOF]),
    );
    // AuthenticationSASLFinal: the server's signature.
    backend_in_pieces(&mut l, &auth_request(12, &[b"v=", SIGNATURE]));
    authenticated(&mut l);
    assert_nothing_kept(&l, "SCRAM");
}

#[test]
fn a_failed_authentication_leaves_no_trace_and_says_nothing_of_the_password() {
    let _g = TRACKING.lock().unwrap_or_else(|e| e.into_inner());
    start_tracking();
    let mut l = lean();
    l.client(&startup()).unwrap();
    l.event(WRITER, Event::WriterConnected).unwrap();
    backend_in_pieces(&mut l, &auth_request(3, &[]));
    client_in_pieces(&mut l, &StackMsg::new(b'p', &[PASSWORD, b"\0"]));
    let fatal = msg(
        b'E',
        b"SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed for user \"app\"\0\0",
    );
    l.backend(WRITER, &fatal).unwrap();
    assert!(l.seen.close_client);
    // The client's next bytes (say, the password again) are refused.
    let again = StackMsg::new(b'p', &[PASSWORD, b"\0"]);
    assert_eq!(l.client(again.bytes()), Err(SessionError::Closed));
    assert_nothing_kept(&l, "failed authentication");
}

#[test]
fn the_session_debug_output_names_only_routing_facts_of_the_startup() {
    let mut l = Lean::new(polarsplit_test_support::default_config());
    l.connect();
    let debug = format!("{:?}", l.session);
    for needed in [&b"user"[..], b"app", b"database", b"db"] {
        assert!(debug.contains(&debug_bytes(needed)), "{needed:?}");
    }
    assert!(!contains(debug.as_bytes(), PASSWORD));
}
