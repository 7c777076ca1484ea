//! The Grafana pack, built from code: provisioning for the ClickHouse data
//! source and the dashboards, the memory dashboard itself, and the compose
//! file that runs it all. `flamehouse grafana --out grafana` writes the
//! files; a test checks the committed copies are fresh and runs every
//! panel's SQL on the engine.
//!
//! Every name the panels query is qualified with the pack's database
//! (`--database`, default `flamehouse`, a validated [`Ident`]), which is
//! also the data source's default database and the one the compose file's
//! `init` creates. Panels call the schema's parameterized views by name;
//! nothing here copies a view's body.
//!
//! Variables never reach SQL raw: every one is written as
//! `decodeURLComponent('${var:percentencode}')`. Grafana's percent-encoding
//! leaves only `[A-Za-z0-9-_.~%]`, so no value (quotes, backslashes, `--`,
//! `;`) can end the string literal; the process variable's value is the
//! numeric process id (its name is only the display text) and the function
//! variable's values are hex-encoded names, so a multi-value selection joined
//! as `{a,b}` splits unambiguously.

pub mod continuous;

use crate::storage::ident::Ident;
use serde_json::{json, Value};

/// The provisioned data source's uid.
pub const DATASOURCE_UID: &str = "flamehouse-clickhouse";
/// The data source plugin.
pub const DATASOURCE_TYPE: &str = "grafana-clickhouse-datasource";
/// The memory dashboard's uid.
pub const MEMORY_UID: &str = "flamehouse-memory";

fn ds() -> Value {
    json!({ "type": DATASOURCE_TYPE, "uid": DATASOURCE_UID })
}

/// A variable as SQL text, safe for any value.
pub fn var(name: &str) -> String {
    format!("decodeURLComponent('${{{name}:percentencode}}')")
}

fn process() -> String {
    format!("toUInt64OrZero({})", var("process"))
}

/// The `max_nodes` variable as the trees take it: 0 every node, else at
/// least 2 (a tree of one node is refused by the UDF; a typed 1 drew an
/// engine error instead of a graph).
pub(crate) fn max_nodes() -> String {
    let n = format!("toUInt32OrZero({})", var("max_nodes"));
    format!("if({n} = 1, 2, {n})")
}

/// The selected functions (hex-encoded values) as `Array(String)`, with no
/// lambda: a view parameter cannot take one (ClickHouse then reports the
/// parameter as not set), so the values are decoded in one `unhex` with
/// byte 0xFF between them, which no UTF-8 name (every label is one)
/// contains. Nothing selected is the empty array (every function).
fn functions() -> String {
    let joined = format!(
        "trimBoth(replaceRegexpAll({}, '[{{}}]', ''))",
        var("function")
    );
    format!("if(empty({joined}), [], splitByChar('\\xFF', unhex(replaceAll({joined}, ',', 'FF'))))")
}

fn target(sql: String, format: u8) -> Value {
    json!({
        "datasource": ds(),
        "refId": "A",
        "editorType": "sql",
        "queryType": if format == 0 { "timeseries" } else { "table" },
        "format": format,
        "rawSql": sql,
    })
}

struct Layout {
    next_id: u64,
}

impl Layout {
    fn panel(
        &mut self,
        kind: &str,
        title: &str,
        desc: &str,
        grid: [u32; 4],
        sql: String,
        format: u8,
    ) -> Value {
        self.next_id += 1;
        let mut p = json!({
            "id": self.next_id,
            "type": kind,
            "title": title,
            "description": desc,
            "datasource": ds(),
            "gridPos": {"x": grid[0], "y": grid[1], "w": grid[2], "h": grid[3]},
            "targets": [target(sql, format)],
        });
        if kind == "flamegraph" {
            p["fieldConfig"] = json!({"defaults": {"unit": "short"}, "overrides": []});
        }
        p
    }
}

/// The panel unit of a view's `metric`.
fn unit(metric: &str) -> &'static str {
    if metric == "bytes" {
        "bytes"
    } else {
        "short"
    }
}

fn flame_sql(db: &Ident, view: &str, args: &str) -> String {
    format!(
        "SELECT level, label, value, self FROM {db}.{view}(process_id = {}, max_nodes = {}, {args}) ORDER BY i",
        process(),
        max_nodes()
    )
}

/// One end of the time range the panels query: the dashboard's, unless it
/// misses the selected process's lifetime (first to last snapshot)
/// entirely, as a profile from last week opened on Grafana's default "last
/// 6 hours" does; then the lifetime's, so the dashboard opens showing the
/// whole process instead of nothing (time series then offer Grafana's "Zoom
/// to data"). A range that meets the lifetime is kept as it is. Grafana
/// cannot set the range from a query, and a range baked into the dashboard
/// would go stale; the processes table's links still set it exactly.
fn bound(db: &Ident, end: bool) -> String {
    let (own, life) = if end {
        ("$__toTime_ms", "end_time")
    } else {
        ("$__fromTime_ms", "first_ts")
    };
    format!(
        "ifNull((SELECT if($__toTime_ms < first_ts OR $__fromTime_ms > end_time, {life}, {own}) \
         FROM {db}.process_list WHERE process_id = {}), {own})",
        process()
    )
}

fn range(db: &Ident) -> String {
    format!("t1 = {}, t2 = {}", bound(db, false), bound(db, true))
}

/// The memory dashboard, querying the schema in database `db`.
pub fn memory_dashboard(db: &Ident) -> Value {
    let mut l = Layout { next_id: 0 };
    let m = var("metric");
    let mut panels = Vec::new();
    panels.push({
        let mut p = l.panel(
            "table",
            "Processes",
            "Every loaded process. Click a name to select it and set the time range to its lifetime. \
             When the time range misses the selected process entirely, the panels show its whole lifetime.",
            [0, 0, 16, 6],
            format!(
                "SELECT name, pid, process_id, start_time, end_time, peak_bytes, peak_time, \
                 toUnixTimestamp64Milli(first_ts) AS from_ms, toUnixTimestamp64Milli(end_time) + 1000 AS to_ms, source \
                 FROM {db}.process_list ORDER BY start_time DESC"
            ),
            1,
        );
        p["fieldConfig"] = json!({
            "defaults": {},
            "overrides": [
                {"matcher": {"id": "byName", "options": "name"}, "properties": [{"id": "links", "value": [{
                    "title": "Show this process's lifetime",
                    "url": format!("/d/{MEMORY_UID}/flamehouse-memory?var-process=${{__data.fields.process_id}}&from=${{__data.fields.from_ms}}&to=${{__data.fields.to_ms}}&${{metric:queryparam}}&${{max_nodes:queryparam}}")
                }]}]},
                {"matcher": {"id": "byName", "options": "peak_bytes"}, "properties": [{"id": "unit", "value": "bytes"}]},
                {"matcher": {"id": "byRegexp", "options": "from_ms|to_ms|process_id"}, "properties": [{"id": "custom.hidden", "value": true}]}
            ]
        });
        p
    });
    panels.push({
        let mut p = l.panel(
            "stat",
            "Memory peak",
            "The earliest snapshot with the largest live size, and the live allocations then.",
            [16, 0, 8, 6],
            format!(
                "SELECT peak_time, peak_bytes, peak_count FROM {db}.peak(process_id = {})",
                process()
            ),
            1,
        );
        p["fieldConfig"] = json!({"defaults": {}, "overrides": [
            {"matcher": {"id": "byName", "options": "peak_bytes"}, "properties": [{"id": "unit", "value": "bytes"}]}
        ]});
        p["options"] = json!({"reduceOptions": {"calcs": ["lastNotNull"], "fields": "/.*/", "values": false}, "textMode": "value_and_name"});
        p
    });
    panels.push(l.panel(
        "flamegraph",
        "Live memory at the peak (${metric})",
        "What was live at the process's memory peak, by call stack.",
        [0, 6, 24, 12],
        flame_sql(db, "flame_peak", &format!("metric = {m}")),
        1,
    ));
    for (i, (col, title, unit)) in [
        ("live_bytes, max_live_bytes", "Live bytes", "bytes"),
        ("live_count, max_live_count", "Live allocations", "short"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut p = l.panel(
            "timeseries",
            title,
            "Whole-process value at the end of each step, and the largest value within it.",
            [12 * i as u32, 18, 12, 8],
            format!(
                "SELECT time, {col} FROM {db}.totals_series(process_id = {}, {}, step = $__interval_s)",
                process(),
                range(db)
            ),
            0,
        );
        p["fieldConfig"] = json!({"defaults": {"unit": unit}, "overrides": []});
        panels.push(p);
    }
    let mut y = 26;
    for (metric, noun) in [("bytes", "bytes"), ("count", "allocations")] {
        for (i, dir) in ["added", "removed"].into_iter().enumerate() {
            let mut p = l.panel(
                "flamegraph",
                &format!("{} {noun} in the selected range", if dir == "added" { "Added" } else { "Removed" }),
                "Per stack: value at the range's end minus value at its start, split by sign (removed shown positive).",
                [12 * i as u32, y, 12, 10],
                flame_sql(db, "flame_change", &format!("metric = '{metric}', {}, direction = '{dir}'", range(db))),
                1,
            );
            p["fieldConfig"]["defaults"]["unit"] = json!(unit(metric));
            panels.push(p);
        }
        y += 10;
        for (i, dir) in ["added", "removed"].into_iter().enumerate() {
            let (cond, order) = if dir == "added" {
                ("total > 0", "total DESC")
            } else {
                ("total < 0", "total ASC")
            };
            let mut p = l.panel(
                "table",
                &format!(
                    "Biggest {} in {noun}",
                    if dir == "added" { "increases" } else { "decreases" }
                ),
                "Functions by change over the selected range (self: as the leaf frame; total: every stack through the function, once).",
                [12 * i as u32, y, 12, 6],
                format!(
                    "SELECT function, self, total FROM {db}.top_functions_change(process_id = {}, metric = '{metric}', {}, limit = 100000) \
                     WHERE {cond} ORDER BY {order}, function LIMIT 20",
                    process(),
                    range(db)
                ),
                1,
            );
            p["fieldConfig"] = json!({"defaults": {"unit": unit(metric)}, "overrides": []});
            panels.push(p);
        }
        y += 6;
    }
    panels.push({
        let mut p = l.panel(
            "flamegraph",
            "Change over the selected range (diff: start vs end, ${metric})",
            "One diff flame graph: the baseline is the range's start, the comparison its end.",
            [0, y, 24, 12],
            format!(
                "SELECT level, label, value, self, valueRight, selfRight FROM {db}.flame_diff(process_id = {}, max_nodes = {}, metric = {m}, {}) ORDER BY i",
                process(),
                max_nodes(),
                range(db)
            ),
            1,
        );
        p["fieldConfig"]["defaults"]["unit"] = json!("short");
        p
    });
    y += 12;
    for (i, (col, title, unit)) in [
        (
            "live_bytes",
            "Live bytes of the selected functions",
            "bytes",
        ),
        (
            "live_count",
            "Live allocations of the selected functions",
            "short",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut p = l.panel(
            "timeseries",
            title,
            "Every stack through the function counted once (recursion included). Pick functions above.",
            [12 * i as u32, y, 12, 8],
            format!(
                "SELECT time, function, {col} FROM {db}.function_series(process_id = {}, step = $__interval_s, \
                 t1 = {}, t2 = {}, functions = {}) ORDER BY time, function",
                process(),
                bound(db, false),
                bound(db, true),
                functions()
            ),
            0,
        );
        p["fieldConfig"] = json!({"defaults": {"unit": unit}, "overrides": []});
        // Whole-minute steps read the per-minute rollup (fast on long
        // profiles); Grafana's intervals from 1m up are whole minutes.
        p["interval"] = json!("1m");
        p["transformations"] = json!([{"id": "prepareTimeSeries", "options": {"format": "multi"}}]);
        panels.push(p);
    }
    y += 8;
    for (i, (metric, title)) in [
        ("bytes", "Cumulative allocated bytes up to the range's end"),
        ("count", "Cumulative allocations up to the range's end"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut p = l.panel(
            "flamegraph",
            title,
            "Everything allocated since the process started, freed or not.",
            [12 * i as u32, y, 12, 10],
            flame_sql(
                db,
                "flame_cumulative",
                &format!("metric = '{metric}', t = {}", bound(db, true)),
            ),
            1,
        );
        p["fieldConfig"]["defaults"]["unit"] = json!(unit(metric));
        panels.push(p);
    }
    y += 10;
    panels.push({
        let mut p = l.panel(
            "table",
            "Top functions at the range's end (${metric})",
            "self: allocated with the function as the leaf frame; total: every stack through it, counted once.",
            [0, y, 24, 8],
            format!(
                "SELECT function, self, total FROM {db}.top_functions(process_id = {}, metric = {m}, t = {}, limit = 50)",
                process(),
                bound(db, true)
            ),
            1,
        );
        p["fieldConfig"] = json!({"defaults": {"unit": "short"}, "overrides": []});
        p
    });

    json!({
        "uid": MEMORY_UID,
        "title": "flamehouse: memory",
        "tags": ["flamehouse", "memory", "profiling"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": true,
        "time": {"from": "now-6h", "to": "now"},
        "links": [],
        "templating": {"list": [
            {
                "name": "process", "label": "Process", "type": "query", "datasource": ds(),
                "query": format!("SELECT concat(name, ' (pid ', toString(pid), ')') AS __text, toString(process_id) AS __value FROM {db}.process_list ORDER BY start_time DESC"),
                "definition": "processes", "refresh": 1, "sort": 0, "multi": false, "includeAll": false
            },
            {
                "name": "metric", "label": "Metric", "type": "custom", "query": "bytes,count",
                "current": {"text": "bytes", "value": "bytes"},
                "options": [{"text": "bytes", "value": "bytes", "selected": true}, {"text": "count", "value": "count", "selected": false}]
            },
            {
                "name": "function", "label": "Functions", "type": "query", "datasource": ds(),
                "query": format!(
                    "SELECT DISTINCT function AS __text, hex(function) AS __value FROM {db}.stack_functions \
                     WHERE stack_id IN (SELECT DISTINCT stack_id FROM {db}.samples WHERE process_id = {}) ORDER BY function",
                    process()
                ),
                "definition": "functions of the process", "refresh": 1, "multi": true, "includeAll": false
            },
            {
                "name": "max_nodes", "label": "Max nodes", "type": "custom", "query": "2000,500,8192,0",
                "current": {"text": "2000", "value": "2000"},
                "options": [
                    {"text": "2000", "value": "2000", "selected": true}, {"text": "500", "value": "500", "selected": false},
                    {"text": "8192", "value": "8192", "selected": false}, {"text": "0", "value": "0", "selected": false}
                ]
            }
        ]},
        "panels": panels,
    })
}

/// The environment variables the data source's provisioning reads, with
/// the values `docker-compose.yaml` gives Grafana. Grafana's provisioning
/// expands only `$VAR` and `${VAR}` (no `${VAR:-default}`: it would look up
/// a variable named `VAR:-default` and get an empty string), so the defaults
/// live here, in the compose file's `environment:`.
pub const DATASOURCE_ENV: [(&str, &str); 4] = [
    ("CLICKHOUSE_HOST", "clickhouse"),
    ("CLICKHOUSE_PORT", "8123"),
    ("CLICKHOUSE_USER", "default"),
    ("CLICKHOUSE_PASSWORD", ""),
];

/// `provisioning/datasources/flamehouse.yaml`: the data source, whose
/// default database is `db` (names the panels leave unqualified, as
/// queries typed in Explore, resolve there).
pub fn datasource_yaml(db: &Ident) -> String {
    let vars: Vec<&str> = DATASOURCE_ENV.iter().map(|(k, _)| *k).collect();
    format!(
        "# Generated by `flamehouse grafana`; do not edit (a test checks freshness).\n\
         # Grafana must have {} in its\n\
         # environment (docker-compose.yaml sets them): provisioning expands $VAR and\n\
         # ${{VAR}} only, without defaults.\n\
         apiVersion: 1\n\
         datasources:\n\
         \x20 - name: flamehouse ClickHouse\n\
         \x20   uid: {DATASOURCE_UID}\n\
         \x20   type: {DATASOURCE_TYPE}\n\
         \x20   isDefault: true\n\
         \x20   jsonData:\n\
         \x20     host: ${{CLICKHOUSE_HOST}}\n\
         \x20     port: ${{CLICKHOUSE_PORT}}\n\
         \x20     protocol: http\n\
         \x20     username: ${{CLICKHOUSE_USER}}\n\
         \x20     defaultDatabase: {db}\n\
         \x20     secure: false\n\
         \x20     dialTimeout: 10\n\
         \x20     queryTimeout: 60\n\
         \x20   secureJsonData:\n\
         \x20     password: ${{CLICKHOUSE_PASSWORD}}\n",
        vars.join(", ")
    )
}

/// `docker-compose.yaml`: ClickHouse with the UDF mounted, the schema
/// applied in `db` by `flamehouse init`, and Grafana with the plugin and
/// this pack.
pub fn compose_yaml(db: &Ident) -> String {
    let env: String = DATASOURCE_ENV
        .iter()
        .map(|(k, v)| format!("      {k}: \"{v}\"\n"))
        .collect();
    format!(
        r#"# Generated by `flamehouse grafana`; do not edit (a test checks freshness).
# The one-command stack: ClickHouse with the flamehouse UDFs, the schema
# applied, and Grafana with the ClickHouse plugin and the flamehouse
# dashboards provisioned. From the repository root:
#
#   cargo build --release --bins
#   docker compose -f grafana/docker-compose.yaml up
#   target/release/flamehouse load --url http://localhost:8123 --database {db} memhawk_*.binpb   # then open http://localhost:3000
#
# Written elsewhere (`flamehouse grafana --out DIR`), set FLAMEHOUSE_BIN to the
# directory holding flamehouse and flamehouse-udf (e.g. ~/.cargo/bin) and
# FLAMEHOUSE_UDF_CONFIG to one holding flamehouse_function.xml
# (`flamehouse-udf config --out DIR` writes it).
# The binaries are linked against glibc and run inside the ClickHouse image:
# they need a glibc no newer than the image's. What they need:
#   objdump -T target/release/flamehouse-udf | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1
#
# Not exercised on the development machines (they have no Docker engine):
# see README "Grafana" for what was and was not run.
services:
  clickhouse:
    image: clickhouse/clickhouse-server:26.5
    ports: ["127.0.0.1:8123:8123", "127.0.0.1:9000:9000"]
    environment:
      CLICKHOUSE_SKIP_USER_SETUP: "1"
    volumes:
      # *_function.xml in the config directory is the server's default
      # user_defined_executable_functions_config.
      - ${{FLAMEHOUSE_UDF_CONFIG:-../sql/udf}}/flamehouse_function.xml:/etc/clickhouse-server/flamehouse_function.xml:ro
      - ${{FLAMEHOUSE_BIN:-../target/release}}/flamehouse-udf:/var/lib/clickhouse/user_scripts/flamehouse-udf:ro
      - clickhouse-data:/var/lib/clickhouse
    healthcheck:
      test: ["CMD", "clickhouse-client", "--query", "SELECT 1"]
      interval: 2s
      retries: 30
    ulimits:
      nofile: {{soft: 262144, hard: 262144}}

  schema:
    # Applies the migrations and the SQL wrapper functions (idempotent).
    image: clickhouse/clickhouse-server:26.5
    depends_on:
      clickhouse: {{condition: service_healthy}}
    volumes:
      - ${{FLAMEHOUSE_BIN:-../target/release}}/flamehouse:/usr/local/bin/flamehouse:ro
    entrypoint: ["/usr/local/bin/flamehouse", "init", "--url", "http://clickhouse:8123", "--database", "{db}"]
    restart: "no"

  grafana:
    image: grafana/grafana:12.3.0
    ports: ["127.0.0.1:3000:3000"]
    depends_on:
      schema: {{condition: service_completed_successfully}}
    environment:
      GF_INSTALL_PLUGINS: grafana-clickhouse-datasource
      GF_AUTH_ANONYMOUS_ENABLED: "true"
      GF_AUTH_ANONYMOUS_ORG_ROLE: Admin
      # Read by provisioning/datasources/flamehouse.yaml.
{env}    volumes:
      - ./provisioning/datasources:/etc/grafana/provisioning/datasources:ro
      - ./provisioning/dashboards:/etc/grafana/provisioning/dashboards:ro
      - ./dashboards:/var/lib/grafana/dashboards/flamehouse:ro

volumes:
  clickhouse-data:
"#
    )
}

/// `docker-compose.serve.yaml`: the light variant, Grafana and
/// `flamehouse serve` (the embedded engine behind ClickHouse's HTTP
/// interface), no ClickHouse server. Grafana reads as user `reader`; loads
/// go to the same port as user `writer`.
pub fn compose_serve_yaml(db: &Ident) -> String {
    format!(
        r#"# Generated by `flamehouse grafana`; do not edit (a test checks freshness).
# The light stack: Grafana and `flamehouse serve`, no ClickHouse server. The
# embedded engine (libchdb.so from scripts/setup-engine.sh) answers
# ClickHouse's HTTP interface on port 8123. From the repository root:
#
#   cargo build --release --bins && scripts/setup-engine.sh
#   export FLAMEHOUSE_READER_PASSWORD=... FLAMEHOUSE_WRITER_PASSWORD=...
#   docker compose -f grafana/docker-compose.serve.yaml up
#   CLICKHOUSE_PASSWORD=$FLAMEHOUSE_WRITER_PASSWORD target/release/flamehouse load --url http://localhost:8123 \
#       --user writer --database {db} --watch memhawk_*.binpb   # then open http://localhost:3000
#
# FLAMEHOUSE_BIN: the directory holding flamehouse and flamehouse-udf;
# FLAMEHOUSE_CHDB: the directory holding libchdb.so. The binaries need a glibc
# no newer than the image's (Debian 12: 2.36).
#
# Not exercised on the development machines (they have no Docker engine):
# `flamehouse serve` itself is tested with real clients (tests/it/serve.rs).
services:
  flamehouse:
    image: debian:12-slim
    # Published on the host's loopback only.
    ports: ["127.0.0.1:8123:8123"]
    environment:
      FLAMEHOUSE_LIBCHDB: /opt/chdb/libchdb.so
      FLAMEHOUSE_UDF: /opt/flamehouse/flamehouse-udf
      FLAMEHOUSE_READER_PASSWORD: ${{FLAMEHOUSE_READER_PASSWORD:?set FLAMEHOUSE_READER_PASSWORD}}
      FLAMEHOUSE_WRITER_PASSWORD: ${{FLAMEHOUSE_WRITER_PASSWORD:?set FLAMEHOUSE_WRITER_PASSWORD}}
    volumes:
      - ${{FLAMEHOUSE_BIN:-../target/release}}:/opt/flamehouse:ro
      - ${{FLAMEHOUSE_CHDB:-${{HOME}}/.cache/flamehouse/chdb/26.5.3}}:/opt/chdb:ro
      - flamehouse-data:/data
    # The schema first (the dashboards need it before the first load), then
    # serve; SIGTERM from `docker compose down` stops it gracefully.
    entrypoint: ["/bin/sh", "-c", "/opt/flamehouse/flamehouse init --data /data --database {db} && exec /opt/flamehouse/flamehouse serve --listen 0.0.0.0:8123 --data /data"]
    stop_grace_period: 70s

  grafana:
    image: grafana/grafana:12.3.0
    ports: ["127.0.0.1:3000:3000"]
    depends_on:
      flamehouse: {{condition: service_started}}
    environment:
      GF_INSTALL_PLUGINS: grafana-clickhouse-datasource
      GF_AUTH_ANONYMOUS_ENABLED: "true"
      GF_AUTH_ANONYMOUS_ORG_ROLE: Admin
      # Read by provisioning/datasources/flamehouse.yaml (protocol http).
      CLICKHOUSE_HOST: "flamehouse"
      CLICKHOUSE_PORT: "8123"
      CLICKHOUSE_USER: "reader"
      CLICKHOUSE_PASSWORD: ${{FLAMEHOUSE_READER_PASSWORD:?set FLAMEHOUSE_READER_PASSWORD}}
    volumes:
      - ./provisioning/datasources:/etc/grafana/provisioning/datasources:ro
      - ./provisioning/dashboards:/etc/grafana/provisioning/dashboards:ro
      - ./dashboards:/var/lib/grafana/dashboards/flamehouse:ro

volumes:
  flamehouse-data:
"#
    )
}

/// `provisioning/dashboards/flamehouse.yaml`: every JSON file in
/// `dashboards/` (memory and continuous profiling).
pub fn dashboards_yaml() -> String {
    "# Generated by `flamehouse grafana`; do not edit (a test checks freshness).\n\
     apiVersion: 1\n\
     providers:\n\
     \x20 - name: flamehouse\n\
     \x20   folder: flamehouse\n\
     \x20   type: file\n\
     \x20   disableDeletion: false\n\
     \x20   allowUiUpdates: true\n\
     \x20   options:\n\
     \x20     path: /var/lib/grafana/dashboards/flamehouse\n\
     \x20     foldersFromFilesStructure: false\n"
        .to_string()
}

/// Every generated file of the pack for the schema in database `db`,
/// relative to `grafana/` (the repository's copy is for the default
/// database, `flamehouse`).
pub fn files(db: &Ident) -> Vec<(&'static str, String)> {
    vec![
        (
            "provisioning/datasources/flamehouse.yaml",
            datasource_yaml(db),
        ),
        ("provisioning/dashboards/flamehouse.yaml", dashboards_yaml()),
        ("docker-compose.yaml", compose_yaml(db)),
        ("docker-compose.serve.yaml", compose_serve_yaml(db)),
        (
            "dashboards/memory.json",
            serde_json::to_string_pretty(&memory_dashboard(db)).expect("json") + "\n",
        ),
        (
            "dashboards/continuous.json",
            serde_json::to_string_pretty(&continuous::continuous_dashboard(db)).expect("json")
                + "\n",
        ),
    ]
}
