//! Runs many plain-read cycles through a session, for profilers (`perf record`, callgrind).
use polarsplit::internals::protocol::encode;
use polarsplit::Engine;
use polarsplit::{ClientInfo, Event, Session};

fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    v.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    v.extend_from_slice(body);
    v
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let engine = Engine::new(polarsplit_test_support::default_config());
    engine.add_reader(1, 1);
    let mut s = Session::new(
        engine.clone(),
        ClientInfo {
            client_addr: Some(("10.0.0.1".into(), 1)),
            ..Default::default()
        },
    );
    let mut st = Vec::new();
    encode::startup_message(&mut st, 3, 0, [(&b"user"[..], &b"app"[..])]);
    s.recv_client(&st, 0).unwrap();
    while s.poll_action().is_some() {}
    s.on_backend_event(1, Event::WriterConnected, 0).unwrap();
    while s.poll_action().is_some() {}
    let mut auth = msg(b'R', &0i32.to_be_bytes());
    let mut z = vec![b'I'];
    z.extend_from_slice(&0x1000u64.to_be_bytes());
    auth.extend(msg(b'Z', &z));
    s.recv_backend(1, &auth, 0).unwrap();
    while s.poll_action().is_some() {}
    let mut q = Vec::new();
    encode::query(
        &mut q,
        &[b"SELECT abalance FROM pgbench_accounts WHERE aid = 48213"],
    );
    let mut ans = msg(
        b'T',
        &[
            0, 1, b'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 23, 0, 4, 255, 255, 255, 255, 0, 0,
        ],
    );
    for _ in 0..3 {
        ans.extend(msg(b'D', &[0, 1, 0, 0, 0, 2, b'4', b'2']));
    }
    ans.extend(msg(b'C', b"SELECT 3\0"));
    ans.extend(msg(b'Z', &z));
    for _ in 0..n {
        s.recv_client(&q, 1).unwrap();
        while s.poll_action().is_some() {}
        s.on_backend_event(
            2,
            Event::ReaderAttached {
                server: 1,
                fresh: false,
                needs_reset: false,
            },
            1,
        )
        .unwrap();
        while s.poll_action().is_some() {}
        s.recv_backend(2, &ans, 1).unwrap();
        while s.poll_action().is_some() {}
    }
}
