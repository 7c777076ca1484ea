// Drives `flamehouse serve` with the official JavaScript client,
// @clickhouse/client (JSON formats over HTTP, gzip), and prints what it got as
// JSON for tests/it/serve.rs to compare with the embedded engine's answers.
//
// usage: node js_client.mjs URL READER_PASSWORD WRITER_PASSWORD DATABASE
import { createClient } from '@clickhouse/client'

const [url, rpass, wpass, db] = process.argv.slice(2)
const opts = { url, compression: { request: true, response: true } }
const reader = createClient({ ...opts, username: 'reader', password: rpass })
const writer = createClient({ ...opts, username: 'writer', password: wpass })
const out = {}
// 64-bit integers as strings: JavaScript numbers cannot hold them.
const clickhouse_settings = { output_format_json_quote_64bit_integers: 1 }
const rows = async (client, query, query_params) =>
  (await client.query({ query, format: 'JSONCompactEachRow', query_params, clickhouse_settings })).json()

out.count = Number((await rows(reader, `SELECT count() FROM ${db}.samples`))[0][0])
const pid = (await rows(reader, `SELECT process_id FROM ${db}.process_list ORDER BY pid LIMIT 1`))[0][0]
out.process_id = String(pid)
const p = await rows(reader,
  `SELECT count(), sum(size_delta) FROM ${db}.samples WHERE process_id = {p:UInt64} AND size_delta > {d:Int64}`,
  { p: pid, d: 0 })
out.param = p[0].map(Number)
const f = await rows(reader,
  `SELECT level, label, value, self FROM ${db}.flame_peak(process_id = {p:UInt64}, max_nodes = 500, metric = 'bytes')`, { p: pid })
out.flame_peak = f.map(([a, b, c, d]) => [Number(a), b, Number(c), Number(d)])

await writer.command({ query: 'DROP TABLE IF EXISTS default.js_insert' })
await writer.command({ query: 'CREATE TABLE default.js_insert (id UInt32, name String, v Float64) ENGINE = MergeTree ORDER BY id' })
const values = []
for (let i = 0; i < 1000; i++) values.push({ id: i, name: `row ${i} \t'quoted'`, v: i / 4 })
const ins = await writer.insert({ table: 'default.js_insert', values, format: 'JSONEachRow' })
out.insert_written = Number(ins.summary?.written_rows ?? -1)
const back = await rows(reader, 'SELECT count(), sum(id), sum(v), max(name) FROM default.js_insert')
out.inserted = [Number(back[0][0]), Number(back[0][1]), Number(back[0][2]), back[0][3]]

const errors = {}
for (const [name, fn] of [
  ['insert', () => reader.insert({ table: 'default.js_insert', values: [{ id: 1, name: 'x', v: 0 }], format: 'JSONEachRow' })],
  ['drop', () => reader.command({ query: 'DROP TABLE default.js_insert' })],
  ['settings', () => reader.query({ query: 'SELECT 1', clickhouse_settings: { max_execution_time: 0 } })],
]) {
  try { await fn(); errors[name] = null } catch (e) { errors[name] = String(e.message ?? e) }
}
out.reader_errors = errors
await reader.close()
await writer.close()
console.log(JSON.stringify(out))
