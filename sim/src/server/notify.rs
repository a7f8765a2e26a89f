//! LISTEN / NOTIFY: notifications are queued at the notifying transaction's commit for every
//! connection of the primary listening then, and sent as NotificationResponse when the
//! listener is between transactions — at once if it is idle, else right after its next
//! ReadyForQuery outside a transaction block (so they can arrive in the middle of a pipelined
//! client's answers, or between a client's answer and a hidden statement's).

use super::prelude::*;

impl Cluster {
    pub(super) fn listen(&mut self, c: &mut Conn, channel: &str) -> ExecResult {
        if self.server(c.server).role == Role::Reader {
            return Err(
                SqlError::new("25006", "cannot execute LISTEN during recovery")
                    .refused()
                    .into(),
            );
        }
        c.listening.insert(channel.to_string());
        Ok("LISTEN".into())
    }

    /// NOTIFY / pg_notify(): queued in the transaction, sent at its commit.
    pub(super) fn notify(
        &mut self,
        c: &mut Conn,
        channel: &str,
        payload: &str,
    ) -> Result<(), SqlError> {
        if self.server(c.server).role == Role::Reader {
            return Err(SqlError::new("25006", "cannot execute NOTIFY during recovery").refused());
        }
        let t = tx(c);
        if t.read_only {
            return Err(read_only_tx("NOTIFY"));
        }
        let n = (channel.to_string(), payload.to_string());
        if !t.notifies.contains(&n) {
            t.notifies.push(n);
        }
        Ok(())
    }

    /// At commit on `c`: queue each notification for every listener (the notifier included).
    pub(super) fn deliver_notifies(&mut self, c: &mut Conn, notifies: Vec<(String, String)>) {
        for (channel, payload) in notifies {
            let mut listeners = Vec::new();
            if c.listening.contains(&channel) {
                c.notifies
                    .push_back((c.pid, channel.clone(), payload.clone()));
                listeners.push(c.id);
            }
            let server = c.server;
            for l in self.conns.values_mut() {
                if l.server == server && !l.is_closed() && l.listening.contains(&channel) {
                    l.notifies
                        .push_back((c.pid, channel.clone(), payload.clone()));
                    listeners.push(l.id);
                }
            }
            listeners.sort();
            self.log(Event::Notify {
                conn: c.id,
                pid: c.pid,
                channel,
                payload,
                listeners,
            });
        }
        let idle: Vec<ConnId> = self
            .conns
            .values()
            .filter(|l| {
                !l.notifies.is_empty()
                    && l.phase == Phase::Ready
                    && l.running.is_none()
                    && l.inbox.is_empty()
                    && l.tx.is_none()
                    && !l.batch_open
            })
            .map(|l| l.id)
            .collect();
        for id in idle {
            let mut l = self.conns.remove(&id).expect("listed");
            self.send_notifies(&mut l);
            self.conns.insert(id, l);
        }
    }

    /// Sends the queued notifications of a connection between transactions.
    pub(super) fn send_notifies(&mut self, c: &mut Conn) {
        while let Some((pid, channel, payload)) = c.notifies.pop_front() {
            c.out.extend(be::notification(pid, &channel, &payload));
            self.log(Event::NotificationSent {
                conn: c.id,
                pid,
                channel,
                payload,
            });
        }
    }
}
