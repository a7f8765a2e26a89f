//! Frontend (client → server) messages, as a driver puts them on the wire.
//!
//! Strings are written as given: a NUL inside one ends it early on the wire, which hostile
//! tests use on purpose.

/// One tagged message: tag, Int32 length (counts itself and the body), body.
pub fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(5 + body.len());
    v.push(tag);
    v.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    v.extend_from_slice(body);
    v
}

pub(crate) fn cstr(o: &mut Vec<u8>, s: &[u8]) {
    o.extend_from_slice(s);
    o.push(0);
}

/// Protocol 3.0, as in a StartupMessage.
pub const PROTOCOL_3_0: u32 = 196_608;
/// The request codes of the untagged startup-phase packets.
pub const SSL_REQUEST_CODE: u32 = 80_877_103;
pub const GSSENC_REQUEST_CODE: u32 = 80_877_104;
pub const CANCEL_REQUEST_CODE: u32 = 80_877_102;

/// An untagged startup-phase packet: Int32 length, Int32 code, body.
pub fn untagged(code: u32, body: &[u8]) -> Vec<u8> {
    let mut v = ((body.len() + 8) as u32).to_be_bytes().to_vec();
    v.extend_from_slice(&code.to_be_bytes());
    v.extend_from_slice(body);
    v
}

/// A StartupMessage (protocol 3.0) with these parameters, in order.
pub fn startup(params: &[(&str, &str)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (k, v) in params {
        cstr(&mut body, k.as_bytes());
        cstr(&mut body, v.as_bytes());
    }
    body.push(0);
    untagged(PROTOCOL_3_0, &body)
}

/// A plain startup (profile `off`).
pub fn startup_plain(user: &str, database: &str) -> Vec<u8> {
    startup(&[("user", user), ("database", database)])
}

/// The startup a polarsplit host sends to a PolarDB server with the `v15` profile (W-1): LSNs
/// and transaction info requested, identity pair included.
pub fn startup_v15(user: &str, database: &str) -> Vec<u8> {
    startup(&[
        ("user", user),
        ("database", database),
        ("_polar_proxy_send_lsn", "1"),
        ("_polar_proxy_send_xact", "1"),
        ("_polar_proxy_client_host", "10.0.0.7"),
        ("_polar_proxy_client_port", "54321"),
    ])
}

pub fn ssl_request() -> Vec<u8> {
    untagged(SSL_REQUEST_CODE, &[])
}

pub fn gssenc_request() -> Vec<u8> {
    untagged(GSSENC_REQUEST_CODE, &[])
}

pub fn cancel_request(pid: i32, secret: u32) -> Vec<u8> {
    let mut b = pid.to_be_bytes().to_vec();
    b.extend_from_slice(&secret.to_be_bytes());
    untagged(CANCEL_REQUEST_CODE, &b)
}

/// A simple Query.
pub fn query(sql: &str) -> Vec<u8> {
    query_bytes(sql.as_bytes())
}

/// A simple Query of arbitrary bytes (not necessarily UTF-8).
pub fn query_bytes(sql: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(sql.len() + 1);
    cstr(&mut b, sql);
    msg(b'Q', &b)
}

/// Parse with no parameter types.
pub fn parse(name: &str, sql: &str) -> Vec<u8> {
    parse_typed(name, sql, &[])
}

/// Parse with parameter type OIDs (0 = unspecified).
pub fn parse_typed(name: &str, sql: &str, types: &[u32]) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, name.as_bytes());
    cstr(&mut b, sql.as_bytes());
    b.extend_from_slice(&(types.len() as i16).to_be_bytes());
    for t in types {
        b.extend_from_slice(&t.to_be_bytes());
    }
    msg(b'P', &b)
}

/// Bind with no parameters and text results.
pub fn bind(portal: &str, statement: &str) -> Vec<u8> {
    bind_params(portal, statement, &[])
}

/// Bind with text parameters (`None` = NULL) and text results.
pub fn bind_params(portal: &str, statement: &str, params: &[Option<&str>]) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, portal.as_bytes());
    cstr(&mut b, statement.as_bytes());
    b.extend_from_slice(&0i16.to_be_bytes()); // parameter formats: all text
    b.extend_from_slice(&(params.len() as i16).to_be_bytes());
    for p in params {
        match p {
            Some(v) => {
                b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                b.extend_from_slice(v.as_bytes());
            }
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    b.extend_from_slice(&0i16.to_be_bytes()); // result formats: all text
    msg(b'B', &b)
}

/// Describe a portal (`portal == true`) or a prepared statement.
pub fn describe(portal: bool, name: &str) -> Vec<u8> {
    let mut b = vec![if portal { b'P' } else { b'S' }];
    cstr(&mut b, name.as_bytes());
    msg(b'D', &b)
}

/// Execute with no row limit.
pub fn execute(portal: &str) -> Vec<u8> {
    execute_limited(portal, 0)
}

/// Execute returning at most `max_rows` rows (0 = all); the rest waits behind PortalSuspended.
pub fn execute_limited(portal: &str, max_rows: i32) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, portal.as_bytes());
    b.extend_from_slice(&max_rows.to_be_bytes());
    msg(b'E', &b)
}

/// Close a portal (`portal == true`) or a prepared statement.
pub fn close(portal: bool, name: &str) -> Vec<u8> {
    let mut b = vec![if portal { b'P' } else { b'S' }];
    cstr(&mut b, name.as_bytes());
    msg(b'C', &b)
}

pub fn sync() -> Vec<u8> {
    msg(b'S', &[])
}

pub fn flush() -> Vec<u8> {
    msg(b'H', &[])
}

pub fn terminate() -> Vec<u8> {
    msg(b'X', &[])
}

pub fn copy_data(data: &[u8]) -> Vec<u8> {
    msg(b'd', data)
}

pub fn copy_done() -> Vec<u8> {
    msg(b'c', &[])
}

pub fn copy_fail(message: &str) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, message.as_bytes());
    msg(b'f', &b)
}

/// PasswordMessage (also SASL responses: the body is opaque).
pub fn password(secret: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, secret);
    msg(b'p', &b)
}

/// FunctionCall of `oid` with no arguments, text result.
pub fn function_call(oid: u32) -> Vec<u8> {
    let mut b = oid.to_be_bytes().to_vec();
    b.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    msg(b'F', &b)
}

/// The messages of one extended-protocol statement: Parse, Bind, Describe(P), Execute, Sync.
pub fn extended_query(name: &str, sql: &str) -> Vec<u8> {
    let mut b = parse(name, sql);
    b.extend(bind("", name));
    b.extend(describe(true, ""));
    b.extend(execute(""));
    b.extend(sync());
    b
}
