"""Drives `flamehouse serve` with the official Python client, clickhouse-connect
(Native format over HTTP, LZ4/zstd compression), and prints what it got as
JSON for tests/it/serve.rs to compare with the embedded engine's answers.

usage: py_client.py HOST PORT READER_PASSWORD WRITER_PASSWORD DATABASE
"""
import json
import sys

import clickhouse_connect
from clickhouse_connect.driver.exceptions import DatabaseError

host, port, rpass, wpass, db = sys.argv[1:6]
port = int(port)
reader = clickhouse_connect.get_client(host=host, port=port, username="reader", password=rpass, compress=True)
writer = clickhouse_connect.get_client(host=host, port=port, username="writer", password=wpass, compress="zstd")
out = {}

# A query and a parameterized one (server-side binding: {name:Type}).
out["count"] = reader.query(f"SELECT count() FROM {db}.samples").result_rows[0][0]
pid = reader.query(f"SELECT process_id FROM {db}.process_list ORDER BY pid LIMIT 1").result_rows[0][0]
out["process_id"] = pid
r = reader.query(
    f"SELECT count(), sum(size_delta) FROM {db}.samples WHERE process_id = {{p:UInt64}} AND size_delta > {{d:Int64}}",
    parameters={"p": pid, "d": 0},
)
out["param"] = [int(x) for x in r.result_rows[0]]
# A view with a bound parameter: the peak's flame graph.
r = reader.query(
    f"SELECT level, label, value, self FROM {db}.flame_peak(process_id = {{p:UInt64}}, max_nodes = 500, metric = 'bytes')",
    parameters={"p": pid},
)
out["flame_peak"] = [[int(a), b, int(c), int(d)] for a, b, c, d in r.result_rows]

# An insert (Native, compressed) as the writer, read back.
writer.command("DROP TABLE IF EXISTS default.py_insert")
writer.command("CREATE TABLE default.py_insert (id UInt32, name String, v Float64) ENGINE = MergeTree ORDER BY id")
rows = [[i, f"row {i} \t'quoted'", i / 4] for i in range(1000)]
s = writer.insert("py_insert", rows, column_names=["id", "name", "v"], database="default")
out["insert_written"] = s.written_rows
r = reader.query("SELECT count(), sum(id), sum(v), max(name) FROM default.py_insert")
out["inserted"] = [int(r.result_rows[0][0]), int(r.result_rows[0][1]), float(r.result_rows[0][2]), r.result_rows[0][3]]

# The reader cannot write, nor lift its limits.
errors = {}
for name, fn in [
    ("insert", lambda: reader.insert("py_insert", [[1, "x", 0.0]], column_names=["id", "name", "v"], database="default")),
    ("drop", lambda: reader.command("DROP TABLE default.py_insert")),
    ("settings", lambda: reader.query("SELECT 1 SETTINGS max_execution_time = 0")),
]:
    try:
        fn()
        errors[name] = None
    except DatabaseError as e:
        errors[name] = str(e)
out["reader_errors"] = errors
print(json.dumps(out))
