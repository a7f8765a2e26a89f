//! Frontend (client → server) messages after startup.

use super::{tag, ProtocolError, Reader};

/// A frontend message, borrowing its body. Bodies the engine never needs (Bind parameters,
/// COPY data, passwords) are left opaque.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrontendMessage<'a> {
    /// Simple Query; `sql` excludes the terminating NUL and is not checked for UTF-8 here.
    Query {
        sql: &'a [u8],
    },
    Parse {
        statement: &'a [u8],
        sql: &'a [u8],
        param_types: u16,
        /// The parameter type OIDs, 4 bytes each, unread: only where the Parse is classified
        /// are they asked whether one names a user type ([`oids_name_user_type`]).
        types: &'a [u8],
    },
    /// Bind: names only; parameter values and formats stay opaque.
    Bind {
        portal: &'a [u8],
        statement: &'a [u8],
    },
    Execute {
        portal: &'a [u8],
        max_rows: i32,
    },
    /// `kind` is `b'S'` (statement) or `b'P'` (portal).
    Describe {
        kind: u8,
        name: &'a [u8],
    },
    Close {
        kind: u8,
        name: &'a [u8],
    },
    Sync,
    Flush,
    Terminate,
    CopyData {
        len: usize,
    },
    CopyDone,
    CopyFail {
        message: &'a [u8],
    },
    FunctionCall {
        len: usize,
        /// The object ID of the function called (`None`: a body too short to hold one).
        function: Option<u32>,
    },
    /// PasswordMessage / SASLInitialResponse / SASLResponse / GSSResponse: never inspected.
    Password {
        len: usize,
    },
}

/// The first OID of an object a database creates (PostgreSQL's `FirstNormalObjectId`): below
/// it, the built-in types (and `information_schema`'s domains, whose checks are built-in
/// expressions).
pub const FIRST_USER_OID: u32 = 16384;

/// Whether a Parse's parameter type OIDs (4 bytes each) name a user type: a domain, whose
/// `CHECK` may call any function, or a composite, an enum, a range or a base type, whose input
/// may be user code — run when the server reads the parameter, with nothing of it in the
/// statement's text (SPEC §7, S-6; an examiner's finding of 2026-12-07: a domain's `CHECK` ran
/// on the standby, where the primary refused the value, and its `set_config` reached other
/// clients through the pooled reader).
pub fn names_user_type(after_sql: &[u8]) -> bool {
    after_sql.get(2..).is_some_and(oids_name_user_type)
}

/// [`names_user_type`] of the OIDs alone (a Parse's `types`).
pub fn oids_name_user_type(oids: &[u8]) -> bool {
    oids.chunks_exact(4)
        .any(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) >= FIRST_USER_OID)
}

impl<'a> FrontendMessage<'a> {
    /// Parses a tagged frontend message body.
    pub fn parse(t: u8, body: &'a [u8]) -> Result<FrontendMessage<'a>, ProtocolError> {
        Self::parse_here(t, body)
    }

    /// [`Self::parse`], built into its caller: the session's reading of every client message
    /// as it arrives, which then matches on the message at once (the message is not returned
    /// through memory).
    #[inline(always)]
    pub(crate) fn parse_here(t: u8, body: &'a [u8]) -> Result<FrontendMessage<'a>, ProtocolError> {
        let mut r = Reader::new(t, body);
        let m = match t {
            tag::QUERY => {
                let sql = r.cstr("query string is not NUL-terminated")?;
                r.expect_end("bytes after the query string")?;
                FrontendMessage::Query { sql }
            }
            tag::PARSE => {
                let statement = r.name("statement name")?;
                let sql = r.cstr("query string")?;
                // Unsigned, as the server reads it (`pq_getmsgint(…, 2)`): up to 65535
                // parameters, which bulk statements of drivers declare (an examiner's finding
                // of 2026-12-07: a count past 32767 was refused as negative, the session ended).
                let n = r.u16("parameter type count")?;
                let types = r.bytes(usize::from(n) * 4, "parameter type list")?;
                r.expect_end("bytes after the parameter types")?;
                FrontendMessage::Parse {
                    statement,
                    sql,
                    param_types: n,
                    types,
                }
            }
            tag::BIND => {
                let portal = r.name("portal name")?;
                let statement = r.name("statement name")?;
                FrontendMessage::Bind { portal, statement }
            }
            tag::EXECUTE => {
                let portal = r.name("portal name")?;
                let max_rows = r.i32("row limit")?;
                r.expect_end("bytes after the row limit")?;
                FrontendMessage::Execute { portal, max_rows }
            }
            tag::DESCRIBE | tag::CLOSE => {
                let kind = r.u8("target kind")?;
                if kind != b'S' && kind != b'P' {
                    return Err(ProtocolError::Malformed {
                        tag: t,
                        what: "target kind is neither 'S' nor 'P'",
                    });
                }
                let name = r.name("name")?;
                r.expect_end("bytes after the name")?;
                Self::describe_or_close(t, kind, name)
            }
            tag::SYNC => FrontendMessage::Sync,
            tag::FLUSH => FrontendMessage::Flush,
            tag::TERMINATE => FrontendMessage::Terminate,
            tag::COPY_DATA => FrontendMessage::CopyData { len: body.len() },
            tag::COPY_DONE => FrontendMessage::CopyDone,
            tag::COPY_FAIL => FrontendMessage::CopyFail {
                message: r.cstr("error message")?,
            },
            tag::FUNCTION_CALL => FrontendMessage::FunctionCall {
                len: body.len(),
                function: body
                    .get(..4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
            },
            tag::PASSWORD => FrontendMessage::Password { len: body.len() },
            _ => {
                return Err(ProtocolError::UnexpectedTag {
                    tag: t,
                    side: "client",
                })
            }
        };
        Ok(m)
    }

    /// [`Self::parse`] again, for a body that parsed before with `names` ([`Names::of`] that
    /// parse): the extended messages are read from where their names end, without scanning
    /// their texts for the NULs again (a kept message is read once more when its batch is
    /// decided and once more when it is sent; issue 20's profile). Every other message, or one
    /// whose `names` do not fit its body, is parsed.
    #[inline(always)]
    pub fn reread(
        t: u8,
        body: &'a [u8],
        names: Names,
    ) -> Result<FrontendMessage<'a>, ProtocolError> {
        let m = match Self::read_at(t, body, names) {
            Some(m) => m,
            None => return Self::parse(t, body),
        };
        debug_assert_eq!(Ok(m), Self::parse(t, body));
        Ok(m)
    }

    /// The message at `names`, with the bytes the layout puts there checked (a NUL ends each
    /// name, the lengths add up); `None` when they are not there.
    #[inline(always)]
    fn read_at(t: u8, body: &'a [u8], names: Names) -> Option<FrontendMessage<'a>> {
        let b = names.end as usize;
        let nul = |i: usize| body.get(i) == Some(&0);
        // The first name: up to the first NUL before the second's end.
        let first = |b: usize| {
            let head = body.get(..b)?;
            let a = head.iter().position(|&c| c == 0)?;
            nul(b).then_some(a)
        };
        Some(match t {
            tag::PARSE => {
                let a = first(b)?;
                let n = body.get(b + 1..b + 3)?;
                let n = u16::from_be_bytes([n[0], n[1]]);
                if body.len() != b + 3 + 4 * usize::from(n) {
                    return None;
                }
                FrontendMessage::Parse {
                    statement: &body[..a],
                    sql: &body[a + 1..b],
                    param_types: n,
                    types: &body[b + 3..],
                }
            }
            tag::BIND => {
                let a = first(b)?;
                FrontendMessage::Bind {
                    portal: &body[..a],
                    statement: &body[a + 1..b],
                }
            }
            tag::EXECUTE => {
                let end = body.len().checked_sub(5)?;
                let rows = body.get(end + 1..)?;
                if !nul(end) {
                    return None;
                }
                FrontendMessage::Execute {
                    portal: &body[..end],
                    max_rows: i32::from_be_bytes([rows[0], rows[1], rows[2], rows[3]]),
                }
            }
            tag::DESCRIBE | tag::CLOSE => {
                let end = body.len().checked_sub(1)?;
                let kind = *body.first()?;
                if end == 0 || !nul(end) || !(kind == b'S' || kind == b'P') {
                    return None;
                }
                Self::describe_or_close(t, kind, &body[1..end])
            }
            tag::SYNC => FrontendMessage::Sync,
            tag::FLUSH => FrontendMessage::Flush,
            _ => return None,
        })
    }

    /// A Describe (`t` is its tag) or else a Close of `kind` `name`.
    fn describe_or_close(t: u8, kind: u8, name: &'a [u8]) -> FrontendMessage<'a> {
        if t == tag::DESCRIBE {
            FrontendMessage::Describe { kind, name }
        } else {
            FrontendMessage::Close { kind, name }
        }
    }

    /// Whether `t` is a frontend message type of protocol 3.
    pub fn is_known_tag(t: u8) -> bool {
        matches!(
            t,
            tag::QUERY
                | tag::PARSE
                | tag::BIND
                | tag::EXECUTE
                | tag::DESCRIBE
                | tag::CLOSE
                | tag::SYNC
                | tag::FLUSH
                | tag::TERMINATE
                | tag::COPY_DATA
                | tag::COPY_DONE
                | tag::COPY_FAIL
                | tag::FUNCTION_CALL
                | tag::PASSWORD
        )
    }
}

/// Whether any parameter value of a Bind (`rest`: its body after the portal and statement names)
/// satisfies `f` — every value, whatever its format (a text value sent in binary is its bytes);
/// SQL NULLs are skipped. `None`: the body does not hold the values it announces.
pub(crate) fn any_bind_value(rest: &[u8], mut f: impl FnMut(&[u8]) -> bool) -> Option<bool> {
    let mut r = Reader::new(tag::BIND, rest);
    // Both counts unsigned, as the server reads them (`pq_getmsgint(…, 2)`).
    let formats = usize::from(r.u16("formats").ok()?);
    r.bytes(2 * formats, "formats").ok()?;
    let values = r.u16("values").ok()?;
    for _ in 0..values {
        let len = r.i32("value").ok()?;
        if let Ok(len) = usize::try_from(len) {
            if f(r.bytes(len, "value").ok()?) {
                return Some(true);
            }
        }
    }
    Some(false)
}

/// Where the text of a Parse or the statement name of a Bind ends in its body (its second NUL):
/// what [`FrontendMessage::reread`] needs to read the same body again without scanning the text
/// (the first name, before it, is short). Taken from a parse ([`Names::of`]); every other
/// message does not need it (its name ends where its body does).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Names {
    end: u32,
}

impl Names {
    /// Where `msg`'s second name ends, `msg` parsed from a body (its slices are that body's).
    pub fn of(msg: &FrontendMessage<'_>) -> Names {
        let end = match *msg {
            FrontendMessage::Parse { statement, sql, .. } => statement.len() + 1 + sql.len(),
            FrontendMessage::Bind { portal, statement } => portal.len() + 1 + statement.len(),
            _ => 0,
        };
        Names {
            end: u32::try_from(end).unwrap_or(u32::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Bind body after its names: `formats`, then `values` (`None`: NULL), no result formats.
    fn bind_rest(formats: &[i16], values: &[Option<&[u8]>]) -> Vec<u8> {
        let mut b = (formats.len() as u16).to_be_bytes().to_vec();
        formats
            .iter()
            .for_each(|f| b.extend_from_slice(&f.to_be_bytes()));
        b.extend_from_slice(&(values.len() as u16).to_be_bytes());
        for v in values {
            match v {
                Some(v) => {
                    b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    b.extend_from_slice(v);
                }
                None => b.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        b.extend_from_slice(&0i16.to_be_bytes());
        b
    }

    #[test]
    fn p5_any_bind_value_reads_every_value_of_every_format() {
        let is_now = |v: &[u8]| v == b"now";
        let rest = bind_rest(&[], &[Some(b"7"), None, Some(b"now")]);
        assert_eq!(any_bind_value(&rest, is_now), Some(true));
        let rest = bind_rest(&[0, 1], &[Some(b"7"), Some(b"now")]);
        assert_eq!(any_bind_value(&rest, is_now), Some(true));
        let rest = bind_rest(&[1], &[None, Some(b"7")]);
        assert_eq!(any_bind_value(&rest, is_now), Some(false));
        assert_eq!(any_bind_value(&bind_rest(&[], &[]), is_now), Some(false));
        // A body shorter than what it announces.
        let rest = bind_rest(&[], &[Some(b"now")]);
        assert_eq!(any_bind_value(&rest[..rest.len() - 4], is_now), None);
        assert_eq!(any_bind_value(&[0, 2], is_now), None);
        assert_eq!(any_bind_value(&[], is_now), None);
    }

    /// E-1, E-2: the 16-bit counts of a Parse (parameter types) and of a Bind (formats,
    /// values) are read unsigned, as the server reads them (`pq_getmsgint(…, 2)`): a bulk
    /// statement's 40,000 parameters are a Parse the session reads, parses again and classifies
    /// (an examiner's finding of 2026-12-07: refused as a negative count, the session ended).
    #[test]
    fn e1_e2_counts_past_32767_are_read_unsigned_as_the_server_reads_them() {
        for n in [32_768u16, 40_000, 65_535] {
            let mut p = b"s\0select $1\0".to_vec();
            p.extend_from_slice(&n.to_be_bytes());
            (0..n).for_each(|_| p.extend_from_slice(&23i32.to_be_bytes()));
            let parsed = FrontendMessage::parse(b'P', &p).unwrap();
            assert!(matches!(
                parsed,
                FrontendMessage::Parse { param_types, types, .. }
                    if param_types == n && types.len() == 4 * usize::from(n)
            ));
            let names = Names::of(&parsed);
            assert_eq!(FrontendMessage::read_at(b'P', &p, names), Some(parsed));
            assert_eq!(FrontendMessage::reread(b'P', &p, names), Ok(parsed));
            // One type short of the count: still refused.
            assert!(FrontendMessage::parse(b'P', &p[..p.len() - 4]).is_err());
            assert_eq!(
                FrontendMessage::read_at(b'P', &p[..p.len() - 4], names),
                None
            );

            let is_now = |v: &[u8]| v == b"now";
            let mut values = vec![Some(&b"7"[..]); usize::from(n) - 1];
            values.push(Some(b"now"));
            let formats = vec![0i16; usize::from(n)];
            assert_eq!(
                any_bind_value(&bind_rest(&formats, &values), is_now),
                Some(true)
            );
            values.pop();
            values.push(None);
            assert_eq!(
                any_bind_value(&bind_rest(&[], &values), is_now),
                Some(false)
            );
        }
    }

    #[test]
    fn parses_each_type() {
        assert_eq!(
            FrontendMessage::parse(b'Q', b"select 1\0").unwrap(),
            FrontendMessage::Query { sql: b"select 1" }
        );
        let mut p = b"s1\0select $1\0".to_vec();
        p.extend_from_slice(&1i16.to_be_bytes());
        p.extend_from_slice(&23i32.to_be_bytes());
        assert_eq!(
            FrontendMessage::parse(b'P', &p).unwrap(),
            FrontendMessage::Parse {
                statement: b"s1",
                sql: b"select $1",
                param_types: 1,
                types: &23i32.to_be_bytes(),
            }
        );
        // A user type among the parameter types (a domain: OID at or above 16384), told.
        let mut u = b"s1\0select $1, $2\0".to_vec();
        u.extend_from_slice(&2i16.to_be_bytes());
        u.extend_from_slice(&23i32.to_be_bytes());
        u.extend_from_slice(&16384i32.to_be_bytes());
        assert!(matches!(
            FrontendMessage::parse(b'P', &u).unwrap(),
            FrontendMessage::Parse {
                types,
                param_types: 2,
                ..
            } if oids_name_user_type(types)
        ));
        assert!(names_user_type(&u[u.len() - 10..]));
        assert!(!names_user_type(&p[p.len() - 6..]));
        assert_eq!(
            FrontendMessage::parse(b'B', b"\0s1\0\0\0\0\0\0\0").unwrap(),
            FrontendMessage::Bind {
                portal: b"",
                statement: b"s1"
            }
        );
        assert_eq!(
            FrontendMessage::parse(b'E', b"\0\0\0\0\0").unwrap(),
            FrontendMessage::Execute {
                portal: b"",
                max_rows: 0
            }
        );
        assert_eq!(
            FrontendMessage::parse(b'D', b"Ss1\0").unwrap(),
            FrontendMessage::Describe {
                kind: b'S',
                name: b"s1"
            }
        );
        assert_eq!(
            FrontendMessage::parse(b'C', b"P\0").unwrap(),
            FrontendMessage::Close {
                kind: b'P',
                name: b""
            }
        );
        assert_eq!(
            FrontendMessage::parse(b'S', b"").unwrap(),
            FrontendMessage::Sync
        );
        assert_eq!(
            FrontendMessage::parse(b'H', b"").unwrap(),
            FrontendMessage::Flush
        );
        assert_eq!(
            FrontendMessage::parse(b'X', b"").unwrap(),
            FrontendMessage::Terminate
        );
        assert_eq!(
            FrontendMessage::parse(b'd', b"abc").unwrap(),
            FrontendMessage::CopyData { len: 3 }
        );
        assert_eq!(
            FrontendMessage::parse(b'c', b"").unwrap(),
            FrontendMessage::CopyDone
        );
        assert_eq!(
            FrontendMessage::parse(b'f', b"oops\0").unwrap(),
            FrontendMessage::CopyFail { message: b"oops" }
        );
        assert_eq!(
            FrontendMessage::parse(b'p', b"secret\0").unwrap(),
            FrontendMessage::Password { len: 7 }
        );
    }

    /// Message bodies of up to `max` bytes made of NULs (weight `nul`), the kind bytes `S` and
    /// `P`, and a few letters: names and texts that end anywhere.
    fn name_bytes(nul: u32, max: usize) -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::strategy::Just;
        proptest::collection::vec(
            proptest::prop_oneof![nul => Just(0u8), 1 => Just(b'S'), 1 => Just(b'P'), 4 => b'a'..=b'e'],
            0..max,
        )
    }

    /// A byte-at-a-time reading of the same layouts, to compare the parser with.
    fn reference(t: u8, body: &[u8]) -> Option<FrontendMessage<'_>> {
        fn cstr<'b>(b: &mut &'b [u8]) -> Option<&'b [u8]> {
            let i = b.iter().position(|&c| c == 0)?;
            let s = &b[..i];
            *b = &b[i + 1..];
            Some(s)
        }
        let mut b = body;
        Some(match t {
            b'Q' => {
                let sql = cstr(&mut b)?;
                b.is_empty().then_some(FrontendMessage::Query { sql })?
            }
            b'P' => {
                let statement = cstr(&mut b)?;
                let sql = cstr(&mut b)?;
                let n = u16::from_be_bytes([*b.first()?, *b.get(1)?]);
                (b.len() == 2 + 4 * usize::from(n)).then_some(FrontendMessage::Parse {
                    statement,
                    sql,
                    param_types: n,
                    types: &b[2..],
                })?
            }
            b'B' => {
                let portal = cstr(&mut b)?;
                let statement = cstr(&mut b)?;
                FrontendMessage::Bind { portal, statement }
            }
            b'E' => {
                let portal = cstr(&mut b)?;
                let max_rows = i32::from_be_bytes(b.try_into().ok()?);
                FrontendMessage::Execute { portal, max_rows }
            }
            b'D' | b'C' => {
                let (&kind, mut rest) = b.split_first()?;
                let name = cstr(&mut rest)?;
                if !(kind == b'S' || kind == b'P') || !rest.is_empty() {
                    return None;
                }
                if t == b'D' {
                    FrontendMessage::Describe { kind, name }
                } else {
                    FrontendMessage::Close { kind, name }
                }
            }
            _ => return None,
        })
    }

    proptest::proptest! {
        /// E-1, E-2: the names and texts the engine reads from the extended messages (the empty
        /// name — the unnamed statement and portal — found without a scan) are exactly those of
        /// a byte-at-a-time reading, and the same bodies are refused.
        #[test]
        fn e1_e2_names_read_as_a_byte_at_a_time_reading_does(
            t in proptest::sample::select(&b"QPBEDC"[..]),
            body in name_bytes(3, 14),
        ) {
            proptest::prop_assert_eq!(FrontendMessage::parse(t, &body).ok(), reference(t, &body));
        }
    }

    proptest::proptest! {
        /// E-1, E-2: a kept message read again from where its names end (when its batch is
        /// decided and when it is sent) is exactly the message its parse read, and no names
        /// make the reading panic.
        #[test]
        fn e1_e2_a_kept_message_reads_again_as_its_parse_read_it(
            t in proptest::sample::select(&b"PBEDCSHQ"[..]),
            body in name_bytes(4, 16),
            end in 0u32..18,
        ) {
            if let Ok(parsed) = FrontendMessage::parse(t, &body) {
                let names = Names::of(&parsed);
                proptest::prop_assert_eq!(FrontendMessage::read_at(t, &body, names).is_some(),
                    !matches!(t, b'Q'));
                proptest::prop_assert_eq!(FrontendMessage::reread(t, &body, names), Ok(parsed));
            }
            // Never a panic, whatever the names.
            let _ = FrontendMessage::read_at(t, &body, Names { end });
            let _ = FrontendMessage::read_at(t, &body, Names { end: u32::MAX });
        }
    }

    #[test]
    fn malformed_frontend_messages() {
        assert!(FrontendMessage::parse(b'Q', b"select 1").is_err());
        assert!(FrontendMessage::parse(b'Q', b"select 1\0x").is_err());
        // 65535 parameter types announced, none there.
        assert!(FrontendMessage::parse(b'P', b"s\0q\0\xff\xff").is_err());
        assert!(FrontendMessage::parse(b'P', b"s\0q\0\0\x02\0\0\0\x17").is_err());
        assert!(FrontendMessage::parse(b'D', b"Xname\0").is_err());
        assert!(FrontendMessage::parse(b'E', b"\0\0\0").is_err());
        assert!(matches!(
            FrontendMessage::parse(b'?', b""),
            Err(ProtocolError::UnexpectedTag { tag: b'?', .. })
        ));
    }
}
