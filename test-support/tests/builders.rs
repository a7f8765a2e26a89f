//! The shared builders produce what the protocol says, byte for byte, and the engine's own
//! parsers read them back (the decoder and the builders agree with the engine).

use polarsplit::internals::protocol::{FrontendMessage, RfqExtensions};
use polarsplit::Lsn;
use polarsplit::{LsnField, Marker, TxStatus};
use polarsplit_test_support::decode::{decode_all, messages, sent_queries, tags, Msg};
use polarsplit_test_support::{be, fe};

const BOTH: RfqExtensions = RfqExtensions {
    lsn: true,
    xact: true,
};

#[test]
fn w2_rfq_bytes_are_the_polardb_layout() {
    // Seen on PolarDB 15.8 (NOTES.md): idle, then an 8-byte LSN.
    assert_eq!(
        be::rfq(b'I', Some(0x40b6_64f8), None),
        b"Z\0\0\0\x0dI\0\0\0\0\x40\xb6\x64\xf8".to_vec()
    );
    assert_eq!(be::rfq(b'T', None, None), b"Z\0\0\0\x05T".to_vec());
    let m = decode_all(&be::rfq(b'T', Some(0x10), Some((b'x', b"1,732"))), BOTH);
    assert_eq!(
        m,
        vec![Msg::ReadyForQuery {
            status: TxStatus::InTransaction,
            lsn: LsnField::At(Lsn(0x10)),
            xact: Some((Marker::Splittable, "1,732".into())),
            len: 20,
        }]
    );
}

#[test]
fn frontend_builders_parse_as_the_engine_reads_them() {
    let mut b = fe::parse_typed("_pg3_0", "SELECT $1", &[23]);
    b.extend(fe::bind_params("p", "_pg3_0", &[Some("7"), None]));
    b.extend(fe::describe(true, "p"));
    b.extend(fe::execute_limited("p", 10));
    b.extend(fe::close(false, "_pg3_0"));
    b.extend(fe::sync());
    b.extend(fe::flush());
    b.extend(fe::query("SELECT 1"));
    b.extend(fe::copy_data(b"1\t2\n"));
    b.extend(fe::copy_done());
    b.extend(fe::terminate());
    assert_eq!(tags(&b), "PBDECSHQdcX");
    let parsed: Vec<String> = messages(&b)
        .iter()
        .map(|(t, body)| format!("{:?}", FrontendMessage::parse(*t, body).expect("parses")))
        .collect();
    assert!(parsed[0].contains("param_types: 1"), "{}", parsed[0]);
    assert!(parsed[3].contains("max_rows: 10"), "{}", parsed[3]);
    assert_eq!(sent_queries(&b), vec!["SELECT 1".to_string()]);
    // Startup: length, protocol 3.0, pairs, terminator.
    assert_eq!(
        fe::startup(&[("user", "u")]),
        b"\0\0\0\x10\0\x03\0\0user\0u\0\0".to_vec()
    );
    assert_eq!(fe::cancel_request(7, 8).len(), 16);
}

#[test]
fn backend_builders_decode_to_what_they_say() {
    let mut b = be::auth_ok();
    b.extend(be::param_status("TimeZone", "UTC"));
    b.extend(be::backend_key(7, 8));
    b.extend(be::parse_complete());
    b.extend(be::bind_complete());
    b.extend(be::parameter_description(&[23]));
    b.extend(be::row_description(&[be::Column::new("v", be::oid::INT4)]));
    b.extend(be::data_row(&[Some("1"), None]));
    b.extend(be::portal_suspended());
    b.extend(be::notification(42, "ch", "hello"));
    b.extend(be::command_complete("SELECT 1"));
    b.extend(be::close_complete());
    b.extend(be::no_data());
    b.extend(be::error("ERROR", "40001", "conflict", Some("d"), None));
    b.extend(be::notice("WARNING", "w", None));
    b.extend(be::rfq(b'I', None, None));
    let m = decode_all(&b, RfqExtensions::default());
    assert_eq!(m[0], Msg::AuthOk);
    assert_eq!(m[1], Msg::ParameterStatus("TimeZone".into(), "UTC".into()));
    assert_eq!(m[6], Msg::RowDescription(vec!["v".into()]));
    assert_eq!(m[7], Msg::DataRow(vec![Some("1".into()), None]));
    assert_eq!(m[8], Msg::PortalSuspended);
    assert_eq!(
        m[9],
        Msg::Notification {
            pid: 42,
            channel: "ch".into(),
            payload: "hello".into()
        }
    );
    match &m[13] {
        Msg::Error(f) => {
            assert_eq!(f.code(), Some("40001"));
            assert_eq!(f.detail(), Some("d"));
        }
        other => panic!("{other:?}"),
    }
    assert!(m[9].is_async() && m[14].is_async() && m[1].is_async());
    assert!(m[15].is_rfq());
    assert_eq!(m.len(), 16);
}
