// Examiner round 10, area d: a node-postgres named statement after a transaction block that
// failed and in which the application's next statement (a SET) was refused, then rolled back.
// The same program against the primary alone is the oracle; one JSON line out.
// Usage: node red10d.js HOST PORT PRIMARY_PORT TABLE REFUSED_STATEMENT
'use strict';
const { Client } = require('pg');

const [host, port, primaryPort, table, refused] = process.argv.slice(2);
const where = (p) => (Number(p) === Number(primaryPort) ? 'primary' : 'standby');
const attempt = async (c, q) => {
  try {
    const r = await c.query(q);
    return 'ok:' + JSON.stringify(r.rows.map((x) => Object.entries(x).map(([k, v]) => (k === 'inet_server_port' ? where(v) : v))));
  } catch (e) {
    return 'err:' + e.code;
  }
};

(async () => {
  const c = new Client({ host, port: Number(port), user: 'app_trust', database: 'app', ssl: false,
    connectionTimeoutMillis: 5000, query_timeout: 5000, options: '-c statement_timeout=5000' });
  await c.connect();
  // A session's first reads may stay on the writer (S-5, P-4): wait until a plain read leaves it.
  let warmed = Number(port) === Number(primaryPort);
  for (let i = 0; i < 60 && !warmed; i++) {
    const r = await c.query('SELECT inet_server_port()');
    warmed = where(r.rows[0].inet_server_port) === 'standby';
    if (!warmed) await new Promise((res) => setTimeout(res, 50));
  }
  const q = (k) => ({ name: 'r10d_by_key', text: `SELECT v, inet_server_port() FROM ${table} WHERE k = $1 AND v <> 'gone'`, values: [k] });
  const out = [];
  out.push(await attempt(c, q(1)));
  out.push(await attempt(c, 'BEGIN'));
  out.push(await attempt(c, `INSERT INTO ${table} VALUES (1, 'duplicate')`));
  out.push(await attempt(c, refused));
  out.push(await attempt(c, q(2)));
  out.push(await attempt(c, 'ROLLBACK'));
  out.push(await attempt(c, q(3)));
  out.push(await attempt(c, q(4)));
  await c.end();
  console.log(JSON.stringify({ warmed, out }));
})().catch((e) => { console.log(JSON.stringify({ fatal: String(e) })); process.exit(1); });
