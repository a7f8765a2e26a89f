// Examiner round 4: node-postgres behaviours through the proxy, one named check per run, one JSON
// line out; the same check against the primary alone is the oracle.
// Usage: node red4.js CHECK HOST PORT PRIMARY_PORT
'use strict';
const { Client } = require('pg');

const [check, host, port, primaryPort] = process.argv.slice(2);
const connect = async (p) => {
  const c = new Client({ host, port: Number(p), user: 'app_trust', database: 'app', ssl: false,
    connectionTimeoutMillis: 10000, query_timeout: 20000 });
  await c.connect();
  return c;
};
const attempt = async (c, q) => {
  try {
    const r = await c.query(q);
    return 'ok:' + JSON.stringify(r.rows.map((x) => Object.values(x)));
  } catch (e) {
    return 'err:' + e.code;
  }
};

const checks = {
  // A pool resets the connection behind node-postgres' back: the driver still believes its named
  // statement is prepared and sends only Bind/Execute. The primary answers 26000.
  async reset_behind_named(reset) {
    const c = await connect(port);
    const q = { name: 'red4_q', text: 'SELECT $1::int + 1 AS n, inet_server_port() > 0 AS p', values: [1] };
    const out = [await attempt(c, q), await attempt(c, q)];
    out.push(await attempt(c, reset));
    out.push(await attempt(c, q));
    out.push(await attempt(c, 'SELECT 1 AS one'));
    await c.end();
    return { out };
  },
  async reset_deallocate() { return checks.reset_behind_named('DEALLOCATE ALL'); },
  async reset_discard() { return checks.reset_behind_named('DISCARD ALL'); },
  async reset_deallocate_name() { return checks.reset_behind_named('DEALLOCATE red4_q'); },
  // LISTEN then reads; every notification of another session arrives.
  async listen() {
    const c = await connect(port);
    const w = await connect(primaryPort);
    let got = 0;
    c.on('notification', () => { got++; });
    await c.query('LISTEN red4_node');
    let standby = 0;
    for (let i = 0; i < 20; i++) {
      await w.query(`NOTIFY red4_node, '${i}'`);
      const r = await c.query({ text: 'SELECT inet_server_port() AS p FROM kv WHERE k = $1', values: [1] });
      if (r.rows.length && r.rows[0].p !== Number(primaryPort)) standby++;
    }
    for (let i = 0; i < 20 && got < 20; i++) await new Promise((r) => setTimeout(r, 100));
    await c.end(); await w.end();
    return { sent: 20, got, standby };
  },
  // A large result of a parameterised read, streamed as the client consumes it.
  async large() {
    const c = await connect(port);
    const r = await c.query({ text: "SELECT g, repeat('x', 200) AS pad FROM generate_series(1, $1::int) g", values: [200000] });
    let sum = 0; for (const row of r.rows) sum += row.g;
    await c.end();
    return { rows: r.rows.length, sum };
  },
};

(async () => {
  const res = await checks[check]();
  console.log(JSON.stringify(res));
})().catch((e) => { console.error(e); process.exit(1); });
