//! `load --watch` follows a file while it grows, in arbitrary chunks (so
//! records are torn mid-write), and ends with exactly what a single load of
//! the finished file stores.

use flamehouse::ingest::{load_file, LoadOptions};
use flamehouse::storage::schema::{migrate, SchemaOptions};
use flamehouse_fixtures::testing::temp_path;
use flamehouse_fixtures::workload::{compile_workload, generate, FixtureOptions};
use flamehouse_tests::*;
use std::io::Write;
use std::time::Duration;

fn table_digest(db: &str) -> String {
    q(&format!(
        "SELECT (SELECT groupBitXor(cityHash64(process_id, ts, stack_id, size, active, total_bytes, size_delta)) FROM {db}.samples), \
                (SELECT count() FROM {db}.samples), \
                (SELECT groupBitXor(cityHash64(ts, size, active)) FROM {db}.totals), \
                (SELECT count() FROM {db}.totals), \
                (SELECT groupBitXor(cityHash64(function, stack_id)) FROM (SELECT DISTINCT function, stack_id FROM {db}.stack_functions))"
    ))
}

#[test]
fn watch_follows_a_growing_file() {
    let dir = temp_path("watch");
    let bin = compile_workload(&dir).unwrap();
    let mut o = FixtureOptions::new(&bin, dir.join("full.binpb"));
    o.snapshots = 40;
    o.stacks = 800;
    o.name = "watched".into();
    generate(&o).unwrap();
    let full = std::fs::read(&o.output).unwrap();

    for db in ["fh_watch_a", "fh_watch_b"] {
        migrate(
            engine(),
            &SchemaOptions {
                database: db.parse().unwrap(),
                cluster: None,
            },
        )
        .unwrap();
    }
    // Reference: one load of the finished file.
    let full_opts = LoadOptions {
        database: "fh_watch_a".parse().unwrap(),
        ..Default::default()
    };
    load_file(engine(), &o.output, &full_opts, &mut |_| {}).unwrap();

    // The live file starts with a few hundred bytes (a torn header record).
    let live = dir.join("live.binpb");
    std::fs::write(&live, &full[..300.min(full.len())]).unwrap();
    let writer = {
        let live = live.clone();
        let full = full.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&live)
                .unwrap();
            let mut pos = 300.min(full.len());
            let mut step = 997; // not a record size: records get torn
            while pos < full.len() {
                let end = (pos + step).min(full.len());
                f.write_all(&full[pos..end]).unwrap();
                f.flush().unwrap();
                pos = end;
                step = step * 3 / 2;
                std::thread::sleep(Duration::from_millis(60));
            }
        })
    };
    let watch_opts = LoadOptions {
        database: "fh_watch_b".parse().unwrap(),
        watch: true,
        poll_interval: Duration::from_millis(50),
        idle_exit: Some(Duration::from_millis(1500)),
        batch_snapshots: 5,
        ..Default::default()
    };
    let s = load_file(engine(), &live, &watch_opts, &mut |_| {}).unwrap();
    writer.join().unwrap();
    assert_eq!(s.snapshots, 41, "{s:?}");
    assert_eq!(table_digest("fh_watch_a"), table_digest("fh_watch_b"));

    // A restart of the follower resumes at the stored offset: nothing new.
    let again = LoadOptions {
        idle_exit: Some(Duration::from_millis(200)),
        ..watch_opts
    };
    let s2 = load_file(engine(), &live, &again, &mut |_| {}).unwrap();
    assert_eq!(s2.snapshots_stored, 0);
    assert_eq!(table_digest("fh_watch_a"), table_digest("fh_watch_b"));

    // The same stream under another path (moved or copied) is recognised by
    // its process, not its path: nothing is stored twice.
    let moved = dir.join("moved.binpb");
    std::fs::copy(&o.output, &moved).unwrap();
    let before = table_digest("fh_watch_a");
    let s3 = load_file(engine(), &moved, &full_opts, &mut |_| {}).unwrap();
    assert_eq!(s3.snapshots_stored, 0);
    assert_eq!(table_digest("fh_watch_a"), before);
}

/// The end of every record (the header first) of a file.
fn record_ends(path: &std::path::Path) -> Vec<u64> {
    let mut reader = flamehouse::formats::binpb::BinpbReader::open(path).unwrap();
    let mut ends = Vec::new();
    while reader.next_record().unwrap().is_some() {
        ends.push(reader.committed_offset());
    }
    ends
}

/// A fixture of `snapshots` + 1 snapshots in its own directory.
fn fixture(tag: &str, name: &str, pid: u32, snapshots: usize) -> std::path::PathBuf {
    let dir = temp_path(tag);
    let bin = compile_workload(&dir).unwrap();
    let mut o = FixtureOptions::new(&bin, dir.join(format!("{name}.binpb")));
    o.snapshots = snapshots;
    o.stacks = 500;
    o.name = name.into();
    o.pid = pid;
    o.seed = u64::from(pid);
    generate(&o).unwrap();
    o.output
}

fn fresh(db: &str) {
    q(&format!("DROP DATABASE IF EXISTS {db}"));
    migrate(
        engine(),
        &SchemaOptions {
            database: db.parse().unwrap(),
            cluster: None,
        },
    )
    .unwrap();
}

fn watch_opts(db: &str, idle_ms: u64) -> LoadOptions {
    LoadOptions {
        database: db.parse().unwrap(),
        watch: true,
        poll_interval: Duration::from_millis(50),
        idle_exit: Some(Duration::from_millis(idle_ms)),
        ..Default::default()
    }
}

/// Runs a load on another thread; `wait` gives its result or fails the test
/// when it has not ended in time.
fn spawn_load(
    path: &std::path::Path,
    opts: LoadOptions,
) -> std::sync::mpsc::Receiver<flamehouse::Result<flamehouse::ingest::LoadSummary>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(load_file(engine(), &path, &opts, &mut |_| {}));
    });
    rx
}

fn wait(
    rx: &std::sync::mpsc::Receiver<flamehouse::Result<flamehouse::ingest::LoadSummary>>,
    secs: u64,
) -> flamehouse::Result<flamehouse::ingest::LoadSummary> {
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("load --watch did not exit within {secs} s"))
}

/// Waits until the database's progress reaches `offset`.
fn wait_progress(db: &str, offset: u64) {
    let t = std::time::Instant::now();
    while q(&format!("SELECT max(offset) FROM {db}.load_progress"))
        .trim()
        .parse::<u64>()
        .unwrap_or(0)
        < offset
    {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no progress to {offset}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A file that ends in a partial record (a crashed profiler) is not
/// growing: `--idle-exit` ends the follow.
#[test]
fn idle_exit_ends_a_follow_of_a_torn_tail() {
    let full = fixture("torn-idle", "tornidle", 611, 12);
    let ends = record_ends(&full);
    let data = std::fs::read(&full).unwrap();
    let live = full.with_file_name("live.binpb");
    let cut = ((ends[ends.len() - 2] + ends[ends.len() - 1]) / 2) as usize;
    std::fs::write(&live, &data[..cut]).unwrap();
    let db = "fh_watch_torn_idle";
    fresh(db);
    let s = wait(&spawn_load(&live, watch_opts(db, 500)), 30).unwrap();
    assert!(s.torn_tail);
    assert_eq!(s.snapshots as usize, ends.len() - 2);
    assert_eq!(s.bytes, ends[ends.len() - 2]);
}

/// The idle clock starts when the follower has caught up, not when it
/// started: a catch-up longer than the idle time, followed by more growth,
/// does not end the follow.
#[test]
fn idle_clock_starts_after_catching_up() {
    let full = fixture("idle-catchup", "catchup", 612, 110);
    let ends = record_ends(&full);
    let data = std::fs::read(&full).unwrap();
    let (a, b) = ("fh_watch_catchup_ref", "fh_watch_catchup");
    fresh(a);
    fresh(b);
    let reference = LoadOptions {
        database: a.parse().unwrap(),
        ..Default::default()
    };
    load_file(engine(), &full, &reference, &mut |_| {}).unwrap();
    let live = full.with_file_name("live.binpb");
    let k = 100;
    std::fs::write(&live, &data[..ends[k] as usize]).unwrap();
    // One snapshot per batch: catching up takes a while.
    let idle = Duration::from_millis(1000);
    let opts = LoadOptions {
        batch_snapshots: 1,
        ..watch_opts(b, idle.as_millis() as u64)
    };
    let started = std::time::Instant::now();
    let rx = spawn_load(&live, opts);
    wait_progress(b, ends[k]);
    let catch_up = started.elapsed();
    // Growth after the catch-up, in steps shorter than the idle time.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&live)
        .unwrap();
    for w in ends[k..].windows(2) {
        std::thread::sleep(Duration::from_millis(300));
        f.write_all(&data[w[0] as usize..w[1] as usize]).unwrap();
        f.flush().unwrap();
    }
    let s = wait(&rx, 60).unwrap();
    assert_eq!(
        s.snapshots as usize,
        ends.len() - 1,
        "catching up took {catch_up:?} (idle time {idle:?}): {s:?}"
    );
    assert_eq!(table_digest(a), table_digest(b));
}

/// A followed file that becomes shorter (truncated, rewritten in place) is
/// an error naming it; what was read before stays stored.
#[test]
fn a_followed_file_that_shrinks_is_an_error() {
    let full = fixture("shrink", "shrink", 613, 10);
    let live = full.with_file_name("live.binpb");
    std::fs::copy(&full, &live).unwrap();
    let len = std::fs::metadata(&live).unwrap().len();
    let db = "fh_watch_shrink";
    fresh(db);
    let rx = spawn_load(&live, watch_opts(db, 5000));
    wait_progress(db, len);
    let f = std::fs::OpenOptions::new().write(true).open(&live).unwrap();
    f.set_len(len / 2).unwrap();
    let e = wait(&rx, 30).expect_err("a truncated file is an error");
    let m = e.to_string();
    let abs = std::fs::canonicalize(&live).unwrap();
    assert!(matches!(e, flamehouse::Error::Truncated { .. }), "{m}");
    assert!(m.contains(&abs.display().to_string()), "{m}");
    assert!(
        m.contains(&format!("from {len} to {} bytes", len / 2)),
        "{m}"
    );
    assert_eq!(
        q(&format!("SELECT max(offset) FROM {db}.load_progress")).trim(),
        len.to_string()
    );
}

/// A file replaced at the followed path (rotation: same name, new inode) is
/// followed like `tail -F`: the old one is read to its end, the new one is
/// loaded as the process its header names.
#[test]
fn a_replaced_file_is_followed_as_its_own_process() {
    let first = fixture("rotate-a", "rotated", 614, 10);
    let second = fixture("rotate-b", "rotated", 615, 14);
    let (a, b) = ("fh_watch_rotate_ref", "fh_watch_rotate");
    fresh(a);
    fresh(b);
    let reference = LoadOptions {
        database: a.parse().unwrap(),
        ..Default::default()
    };
    let pa = load_file(engine(), &first, &reference, &mut |_| {})
        .unwrap()
        .process_id;
    let pb = load_file(engine(), &second, &reference, &mut |_| {})
        .unwrap()
        .process_id;
    assert_ne!(pa, pb);
    let live = first.with_file_name("live.binpb");
    let data = std::fs::read(&first).unwrap();
    // Half of the first file, then the rest just before the rotation: the
    // follower reads the old file to its end.
    let half = record_ends(&first)[5] as usize;
    std::fs::write(&live, &data[..half]).unwrap();
    let rx = spawn_load(&live, watch_opts(b, 2000));
    wait_progress(b, half as u64);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&live)
        .unwrap();
    f.write_all(&data[half..]).unwrap();
    drop(f);
    std::fs::rename(&live, live.with_extension("binpb.1")).unwrap();
    let tmp = live.with_extension("tmp");
    std::fs::copy(&second, &tmp).unwrap();
    std::fs::rename(&tmp, &live).unwrap();
    let s = wait(&rx, 60).unwrap();
    assert_eq!(s.followed.len(), 1, "{s:?}");
    assert_eq!(s.followed[0].process_id, pa);
    assert_eq!(s.followed[0].snapshots, 11);
    assert_eq!(s.process_id, pb);
    assert_eq!(s.snapshots, 15);
    assert_eq!(table_digest(a), table_digest(b));
    assert_eq!(
        q(&format!(
            "SELECT process_id, count() FROM {b}.totals GROUP BY process_id ORDER BY process_id"
        )),
        q(&format!(
            "SELECT process_id, count() FROM {a}.totals GROUP BY process_id ORDER BY process_id"
        ))
    );
}

fn cli(data: &std::path::Path, args: &[&str], crash: bool) -> std::process::Output {
    let bin = udf_binary().with_file_name("flamehouse");
    let mut c = std::process::Command::new(bin);
    c.arg(args[0]).arg("--data").arg(data).args(&args[1..]);
    if crash {
        c.env("FLAMEHOUSE_TEST_CRASH", "after-samples");
    }
    c.output().expect("flamehouse runs")
}

fn cli_ok(data: &std::path::Path, args: &[&str]) -> String {
    let out = cli(data, args, false);
    assert!(
        out.status.success(),
        "flamehouse {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A `--watch` load that crashes between a batch's samples and its
/// progress (the batch cut where the file happened to end), restarted after
/// the file grew, stores every row once: every table equals one
/// uninterrupted load of the final file.
#[test]
fn crash_after_samples_then_growth_stores_nothing_twice() {
    let full = fixture("crash", "crashy", 616, 40);
    let dir = full.parent().unwrap().to_path_buf();
    let ends = record_ends(&full);
    let data = std::fs::read(&full).unwrap();
    let live = dir.join("live.binpb");
    let live_s = live.to_str().unwrap();
    let store = dir.join("data");
    // 20 snapshots loaded, then 7 more appear and the follower crashes
    // right after inserting their samples.
    std::fs::write(&live, &data[..ends[20] as usize]).unwrap();
    cli_ok(&store, &["load", "--database", "fh_crash", live_s]);
    std::fs::write(&live, &data[..ends[27] as usize]).unwrap();
    let out = cli(
        &store,
        &[
            "load",
            "--database",
            "fh_crash",
            "--watch",
            "--idle-exit",
            "5",
            live_s,
        ],
        true,
    );
    assert_eq!(
        out.status.code(),
        Some(137),
        "the crash hook did not fire: {out:?}"
    );
    // The file grows to its end; the restarted load catches up.
    std::fs::write(&live, &data).unwrap();
    cli_ok(&store, &["load", "--database", "fh_crash", live_s]);
    // Reference: one load of the final file.
    cli_ok(&store, &["load", "--database", "fh_crash_ref", live_s]);
    let tables = |db: &str| -> Vec<String> {
        [
            format!("SELECT * FROM {db}.samples ORDER BY ALL"),
            format!(
                "SELECT process_id, stack_id, minute, sum(size_delta), sum(active_delta) \
                 FROM {db}.samples_1m GROUP BY ALL ORDER BY ALL"
            ),
            format!("SELECT * FROM {db}.totals ORDER BY ALL"),
            format!("SELECT * FROM {db}.frames ORDER BY ALL"),
            format!("SELECT * FROM {db}.stacks ORDER BY ALL"),
            format!("SELECT * FROM {db}.stack_functions ORDER BY ALL"),
            format!(
                "SELECT * EXCEPT (loaded_at, generation) FROM {db}.processes FINAL ORDER BY ALL"
            ),
            format!(
                "SELECT process_id, max(offset), argMax(snapshots, offset), argMax(last_ts, offset) \
                 FROM {db}.load_progress GROUP BY process_id"
            ),
            format!(
                "SELECT process_id, min(first_ts), max(last_ts), max(peak_size), argMaxMerge(peak) \
                 FROM {db}.process_stats GROUP BY process_id"
            ),
        ]
        .iter()
        .map(|sql| cli_ok(&store, &["sql", sql]))
        .collect()
    };
    let (got, want) = (tables("fh_crash"), tables("fh_crash_ref"));
    assert!(want[0].lines().count() > 100, "{}", want[0].len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g == w,
            "table query {i} differs: {} vs {} lines",
            g.lines().count(),
            w.lines().count()
        );
    }
    assert_eq!(
        cli_ok(
            &store,
            &["sql", "SELECT max(offset) FROM fh_crash.load_progress"]
        )
        .trim(),
        data.len().to_string()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--watch` of a file not created yet waits for it, as `tail -F` does
/// (a loader started before the profiler), then stores what a single load
/// of it stores; up to `--idle-exit`, after which it is an error naming the
/// file.
#[test]
fn watch_waits_for_a_file_not_created_yet() {
    let src = fixture("watch-later", "later", 4301, 10);
    let live = src.with_file_name("not-yet.binpb");
    let (a, b) = ("fh_watch_later_a", "fh_watch_later_b");
    fresh(a);
    fresh(b);
    let opts = |db: &str, watch: bool, idle_ms: u64| LoadOptions {
        database: db.parse().unwrap(),
        watch,
        poll_interval: Duration::from_millis(50),
        idle_exit: Some(Duration::from_millis(idle_ms)),
        ..Default::default()
    };
    load_file(engine(), &src, &opts(a, false, 0), &mut |_| {}).unwrap();

    let e = load_file(engine(), &live, &opts(b, true, 300), &mut |_| {}).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}: not created within 0.3 s (--idle-exit)", live.display())
    );

    let writer = {
        let (src, live) = (src.clone(), live.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            std::fs::copy(&src, &live).unwrap();
        })
    };
    let s = load_file(engine(), &live, &opts(b, true, 1500), &mut |_| {}).unwrap();
    writer.join().unwrap();
    assert_eq!(s.snapshots, 11, "{s:?}");
    assert_eq!(table_digest(a), table_digest(b));

    // A file that stays empty (or never gets a whole header record) is
    // an error at --idle-exit, not a summary of "process 0".
    let empty = src.with_file_name("empty.binpb");
    std::fs::write(&empty, b"").unwrap();
    let e = load_file(engine(), &empty, &opts(b, true, 300), &mut |_| {}).unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "{}: no complete header record in 0 bytes after 0.3 s without growth (--idle-exit)",
            std::fs::canonicalize(&empty).unwrap().display()
        )),
        "{e}"
    );
    assert_eq!(table_digest(a), table_digest(b));
}
