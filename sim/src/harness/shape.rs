//! "What a client receives equals what one server would send" (E-2, P-8): the answers a
//! single PostgreSQL server gives to a client's messages, matched message by message against
//! what the client actually got. Asynchronous messages (NoticeResponse, ParameterStatus,
//! NotificationResponse) may come anywhere. A hidden statement's ParseComplete, BindComplete,
//! CommandComplete or ReadyForQuery reaching the client, an answer missing, or a second result
//! for one Execute is a violation.

use crate::client::Msg;

/// A frontend message of a client's script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Front {
    Query(String),
    Parse {
        name: String,
        sql: String,
    },
    Bind {
        portal: String,
        statement: String,
        /// Parameter values (text format; `None` is NULL).
        params: Vec<Option<String>>,
    },
    /// Describe of a portal (`portal`) or a statement.
    Describe {
        portal: bool,
        name: String,
    },
    Execute {
        portal: String,
        /// Row limit (0: all rows).
        max_rows: i32,
    },
    Close {
        portal: bool,
        name: String,
    },
    Sync,
    Flush,
}

impl Front {
    pub fn bytes(&self) -> Vec<u8> {
        use crate::client as fe;
        match self {
            Front::Query(sql) => fe::query(sql),
            Front::Parse { name, sql } => fe::parse(name, sql),
            Front::Bind {
                portal,
                statement,
                params,
            } => {
                let p: Vec<Option<&str>> = params.iter().map(|v| v.as_deref()).collect();
                fe::bind_params(portal, statement, &p)
            }
            Front::Describe { portal, name } => fe::describe(*portal, name),
            Front::Execute { portal, max_rows } => fe::execute_limited(portal, *max_rows),
            Front::Close { portal, name } => fe::close(*portal, name),
            Front::Sync => fe::sync(),
            Front::Flush => fe::flush(),
        }
    }
}

/// The result of one Execute (or one statement of a simple Query).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Index of the script message it answers.
    pub front: usize,
    pub rows: Vec<Vec<Option<String>>>,
    /// SQLSTATE of the error that ended it.
    pub error: Option<String>,
    pub tag: Option<String>,
    pub suspended: bool,
}

/// How far the answers to a script have come.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// Every expected answer arrived.
    pub complete: bool,
    /// ReadyForQuery messages received.
    pub rfqs: usize,
    pub outcomes: Vec<Outcome>,
    /// The first mismatch, if any.
    pub violation: Option<String>,
}

/// A backend message's type letter as on the wire (`?` for asynchronous and startup ones).
pub fn kind(m: &Msg) -> char {
    match m {
        Msg::ParseComplete => '1',
        Msg::BindComplete => '2',
        Msg::CloseComplete => '3',
        Msg::ParameterDescription => 't',
        Msg::RowDescription(_) => 'T',
        Msg::NoData => 'n',
        Msg::DataRow(_) => 'D',
        Msg::CommandComplete(_) => 'C',
        Msg::PortalSuspended => 's',
        Msg::Error(_) => 'E',
        Msg::EmptyQuery => 'I',
        Msg::ReadyForQuery { .. } => 'Z',
        _ => '?',
    }
}

/// Matches `msgs` (everything the client received for `script`, in order) against what one
/// server would answer.
pub fn progress(script: &[Front], msgs: &[Msg]) -> Progress {
    let mut p = Progress::default();
    let answers: Vec<&Msg> = msgs.iter().filter(|m| !m.is_async()).collect();
    let mut a = 0; // next answer
    let mut skipping = false; // an error: skip to Sync
    for (i, f) in script.iter().enumerate() {
        if skipping && !matches!(f, Front::Sync) {
            continue;
        }
        let want = |p: &mut Progress, a: usize, what: &str| -> bool {
            match answers.get(a) {
                None => false,
                Some(m) => {
                    if p.violation.is_none() {
                        p.violation = Some(format!(
                            "message {a} of the answer: {m:?} where one server sends {what} (for {f:?})"
                        ));
                    }
                    false
                }
            }
        };
        match f {
            Front::Flush => {}
            Front::Sync => {
                skipping = false;
                match answers.get(a) {
                    Some(Msg::ReadyForQuery { .. }) => {
                        a += 1;
                        p.rfqs += 1;
                    }
                    _ => {
                        want(&mut p, a, "ReadyForQuery");
                        return p;
                    }
                }
            }
            Front::Query(_) => {
                // Per statement: [RowDescription] DataRow* CommandComplete, or EmptyQuery, or an
                // ErrorResponse that ends the Query; then ReadyForQuery.
                let mut cur = Outcome {
                    front: i,
                    ..Outcome::default()
                };
                loop {
                    let Some(m) = answers.get(a) else {
                        return p;
                    };
                    a += 1;
                    match m {
                        Msg::RowDescription(_) if cur.rows.is_empty() => {}
                        Msg::DataRow(r) => cur.rows.push(r.clone()),
                        Msg::CommandComplete(t) => {
                            cur.tag = Some(t.clone());
                            p.outcomes.push(std::mem::take(&mut cur));
                            cur.front = i;
                        }
                        Msg::EmptyQuery => {}
                        Msg::Error(e) => {
                            cur.error = Some(e.code().unwrap_or("").to_string());
                            p.outcomes.push(std::mem::take(&mut cur));
                            cur.front = i;
                            match answers.get(a) {
                                Some(Msg::ReadyForQuery { .. }) => {
                                    a += 1;
                                    p.rfqs += 1;
                                    break;
                                }
                                None => return p,
                                Some(_) => {
                                    want(&mut p, a, "ReadyForQuery after an error");
                                    return p;
                                }
                            }
                        }
                        Msg::ReadyForQuery { .. } => {
                            p.rfqs += 1;
                            break;
                        }
                        _ => {
                            want(&mut p, a - 1, "a simple Query's answer");
                            return p;
                        }
                    }
                }
            }
            Front::Parse { .. } | Front::Bind { .. } | Front::Close { .. } => {
                let ok = match f {
                    Front::Parse { .. } => '1',
                    Front::Bind { .. } => '2',
                    _ => '3',
                };
                match answers.get(a).map(|m| kind(m)) {
                    Some(k) if k == ok => a += 1,
                    Some('E') => {
                        a += 1;
                        skipping = true;
                    }
                    _ => {
                        want(&mut p, a, &format!("'{ok}'"));
                        return p;
                    }
                }
            }
            Front::Describe { portal, .. } => {
                if !portal {
                    match answers.get(a).map(|m| kind(m)) {
                        Some('t') => a += 1,
                        Some('E') => {
                            a += 1;
                            skipping = true;
                            continue;
                        }
                        _ => {
                            want(&mut p, a, "ParameterDescription");
                            return p;
                        }
                    }
                }
                match answers.get(a).map(|m| kind(m)) {
                    Some('T' | 'n') => a += 1,
                    Some('E') => {
                        a += 1;
                        skipping = true;
                    }
                    _ => {
                        want(&mut p, a, "RowDescription or NoData");
                        return p;
                    }
                }
            }
            Front::Execute { .. } => {
                let mut cur = Outcome {
                    front: i,
                    ..Outcome::default()
                };
                loop {
                    let Some(m) = answers.get(a) else {
                        return p;
                    };
                    match m {
                        Msg::DataRow(r) => cur.rows.push(r.clone()),
                        Msg::CommandComplete(t) => cur.tag = Some(t.clone()),
                        Msg::PortalSuspended => cur.suspended = true,
                        Msg::EmptyQuery => {}
                        Msg::Error(e) => {
                            cur.error = Some(e.code().unwrap_or("").to_string());
                            skipping = true;
                        }
                        _ => {
                            want(&mut p, a, "an Execute's rows and completion");
                            return p;
                        }
                    }
                    a += 1;
                    if !matches!(m, Msg::DataRow(_)) {
                        break;
                    }
                }
                p.outcomes.push(cur);
            }
        }
    }
    if let Some(m) = answers.get(a) {
        if p.violation.is_none() {
            p.violation = Some(format!(
                "message {a} of the answer: {m:?} after everything one server sends"
            ));
        }
    }
    p.complete = true;
    p
}

/// How many ReadyForQuery messages one server sends for `script`.
/// Whether a script leaves an extended batch open behind it: messages after its last Sync
/// (a Parse/Describe/Flush that waits for its answer, E-1) that the next operation's
/// messages continue.
pub fn leaves_batch_open(script: &[Front]) -> bool {
    script
        .iter()
        .rev()
        .find(|m| !matches!(m, Front::Flush))
        .is_some_and(|m| !matches!(m, Front::Sync | Front::Query(_)))
}

pub fn rfqs_expected(script: &[Front]) -> usize {
    script
        .iter()
        .filter(|f| matches!(f, Front::Sync | Front::Query(_)))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Fields;
    use polarsplit::{LsnField, TxStatus};

    fn z() -> Msg {
        Msg::ReadyForQuery {
            status: TxStatus::Idle,
            lsn: LsnField::Missing,
            xact: None,
            len: 5,
        }
    }

    fn batch() -> Vec<Front> {
        vec![
            Front::Parse {
                name: "s".into(),
                sql: "SELECT 1".into(),
            },
            Front::Bind {
                portal: String::new(),
                statement: "s".into(),
                params: vec![],
            },
            Front::Execute {
                portal: String::new(),
                max_rows: 0,
            },
            Front::Sync,
        ]
    }

    #[test]
    fn one_server_answer_is_complete() {
        let m = vec![
            Msg::ParseComplete,
            Msg::BindComplete,
            Msg::DataRow(vec![Some("1".into())]),
            Msg::CommandComplete("SELECT 1".into()),
            z(),
        ];
        let p = progress(&batch(), &m);
        assert!(p.complete && p.violation.is_none(), "{p:?}");
        assert_eq!(p.outcomes[0].rows.len(), 1);
        assert!(!progress(&batch(), &m[..4]).complete);
    }

    #[test]
    fn hidden_parse_complete_is_caught() {
        let m = vec![
            Msg::ParseComplete,
            Msg::ParseComplete,
            Msg::BindComplete,
            Msg::CommandComplete("SELECT 1".into()),
            z(),
        ];
        assert!(progress(&batch(), &m).violation.is_some());
    }

    #[test]
    fn an_error_skips_to_sync_and_async_messages_are_anywhere() {
        let m = vec![
            Msg::ParseComplete,
            Msg::Notice(Fields(vec![])),
            Msg::Error(Fields(vec![(b'C', "42P01".into())])),
            z(),
            Msg::Notification {
                pid: 1,
                channel: "c".into(),
                payload: "p".into(),
            },
        ];
        let p = progress(&batch(), &m);
        assert!(p.complete && p.violation.is_none(), "{p:?}");
        // An extra ReadyForQuery (a hidden statement's) is not what one server sends.
        let mut m2 = m.clone();
        m2.push(z());
        assert!(progress(&batch(), &m2).violation.is_some());
    }
}
