// Issue 18: the read-your-writes workload through node-postgres (npm `pg`) with named queries: a
// query config with `name` makes pg Parse it once per connection under that name and then send only
// Bind/Execute/Sync — a named prepared statement from the first execution on.
//
// Usage: node ryw.js HOST PORT STANDBY_PORT RO_KEY RW_KEY READS ROUNDS
// Phase ro: READS point reads of RO_KEY in a session that has written nothing.
// Phase rw: ROUNDS times UPDATE kv SET v = i WHERE k = RW_KEY, then read it back at once (stale if v != i).
// Every read selects inet_server_port(), which says which server answered. Prints one JSON line.
'use strict';
const { Client } = require('pg');

async function main() {
  const [host, port, standbyPort, roKey, rwKey, reads, rounds] = process.argv.slice(2);
  const client = new Client({
    host, port: Number(port), user: 'app_trust', database: 'app', ssl: false,
    connectionTimeoutMillis: 10000,
    query_timeout: 20000, // a hang fails this program, not the test run
  });
  await client.connect();
  const read = (k) => ({ name: 'ryw_read', text: 'SELECT v, inet_server_port() AS port FROM kv WHERE k = $1', values: [k] });
  let roStandby = 0, pwStandby = 0, stale = 0;
  for (let i = 0; i < Number(reads); i++) {
    const r = await client.query(read(Number(roKey)));
    if (r.rows.length !== 1) throw new Error(`row ${roKey} missing`);
    if (Number(r.rows[0].port) === Number(standbyPort)) roStandby++;
  }
  for (let i = 1; i <= Number(rounds); i++) {
    const w = await client.query({ name: 'ryw_write', text: 'UPDATE kv SET v = $1 WHERE k = $2', values: [i, Number(rwKey)] });
    if (w.rowCount !== 1) throw new Error(`row ${rwKey} missing`);
    const r = await client.query(read(Number(rwKey)));
    if (r.rows[0].v !== i) stale++;
    if (Number(r.rows[0].port) === Number(standbyPort)) pwStandby++;
  }
  await client.end();
  console.log(JSON.stringify({ ro_reads: Number(reads), ro_standby: roStandby, pw_reads: Number(rounds), pw_standby: pwStandby, stale }));
}

main().catch((e) => { console.error(`node ryw: ${e.stack || e}`); process.exit(1); });
