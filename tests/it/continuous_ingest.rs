//! Batched continuous-profile loads (`flamehouse::ingest::cp_batch`,
//! `flamehouse load` of many files): many profiles per insert, a bad file
//! in a batch, a load stopped half-way and run again with other batches,
//! samples cut inside one insert, and profiles older than the retention.
//!
//! The files are pprof profiles written here (`pprof_writer`) at times
//! relative to now, so the retention never catches them by surprise; the
//! oracle of every stored total is the sum of the values written, and the
//! state of a database loaded file by file is the reference of a batched
//! or interrupted one.

use flamehouse::formats::pprof::write::PprofWriter;
use flamehouse::ingest::continuous::{pprof_rows, ContinuousOptions};
use flamehouse::ingest::cp_batch::{load_files, BatchOptions, FileEvent, FilesSummary};
use flamehouse::storage::schema::{migrate, SchemaOptions};
use flamehouse_fixtures::testing::temp_path;
use flamehouse_tests::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A minute ago, but not before today's midnight (UTC): the profiles a test
/// writes a few seconds apart after it then share one day partition, so the
/// part counts the tests assert do not depend on the hour they run at
/// (around midnight a minute ago was yesterday: two partitions, two parts).
fn recent_ms() -> i64 {
    let now = now_ms();
    (now - 60_000).max(now - now.rem_euclid(86_400_000))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Writes a gzipped CPU pprof at `ms` whose stacks and values depend on
/// `seed`; returns the sum of its `cpu` values.
fn write_profile(path: &Path, seed: i64, ms: i64) -> i64 {
    let mut w = PprofWriter::new(
        &[("samples", "count"), ("cpu", "nanoseconds")],
        ("cpu", "nanoseconds"),
        10_000_000,
    );
    w.set_time(ms * 1_000_000, 10_000_000_000);
    let mut total = 0;
    for i in 0..(5 + seed % 4) {
        // Every file has frames, stacks and series of its own (so every
        // batch inserts into every table), and some shared.
        let leaf = format!("pkg.leaf{}_{}", seed, i % 3);
        let mid = format!("pkg.mid{}", i % 3);
        let count = 1 + (seed + i) % 9;
        let host = format!("host-{seed}-{}", i % 2);
        w.add_sample(
            &[&leaf, &mid, "main.main"],
            &[count, count * 10_000_000],
            &[("host", &host)],
        );
        total += count * 10_000_000;
    }
    std::fs::write(path, w.encode_gzip().unwrap()).unwrap();
    total
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

fn copts(db: &str) -> ContinuousOptions {
    ContinuousOptions {
        database: db.parse().unwrap(),
        service: Some("api".into()),
        ..Default::default()
    }
}

/// Every count and sum a load leaves, views included.
fn state(db: &str) -> String {
    q(&format!(
        "SELECT (SELECT count(), sum(value) FROM {db}.cp_samples), \
         (SELECT sum(value) FROM {db}.cp_samples_1m), \
         (SELECT count() FROM {db}.cp_series), (SELECT count() FROM {db}.cp_label_values), \
         (SELECT count() FROM {db}.stacks), (SELECT count() FROM {db}.stack_functions), \
         (SELECT count() FROM {db}.frames), (SELECT count(), sum(total) FROM {db}.cp_profiles)"
    ))
}

fn cpu_total(db: &str) -> i64 {
    q(&format!(
        "SELECT sum(value) FROM {db}.cp_samples WHERE profile_type = 'cpu:nanoseconds'"
    ))
    .trim()
    .parse()
    .unwrap()
}

fn load(
    backend: &dyn flamehouse::storage::Backend,
    files: &[PathBuf],
    opts: &ContinuousOptions,
    batch_rows: usize,
) -> (flamehouse::Result<FilesSummary>, Vec<String>) {
    let mut events = Vec::new();
    let r = load_files(
        backend,
        files,
        opts,
        &BatchOptions {
            batch_rows,
            ..Default::default()
        },
        &mut |e| {
            events.push(match e {
                FileEvent::Stored(p) => format!("stored {}", p.len()),
                FileEvent::Failed(f, e) => format!("failed {} {e}", f.display()),
                FileEvent::Expired { source, .. } => format!("expired {source}"),
            })
        },
    );
    (r, events)
}

/// Good files around a bad one, all in one batch: the bad one is reported
/// (naming it) and stores nothing, every good one is stored once, in one
/// insert per table; loading the same list again stores nothing more.
#[test]
fn a_bad_file_in_a_batch_stores_the_others_once() {
    let dir = temp_path("cpingest-bad");
    let now = recent_ms();
    let mut files = Vec::new();
    let mut want = 0;
    for i in 0..6 {
        let p = dir.join(format!("p{i}.pb.gz"));
        want += write_profile(&p, i, now + i * 10_000);
        files.push(p);
    }
    let bad = dir.join("bad.pb.gz");
    let gz = std::fs::read(&files[0]).unwrap();
    std::fs::write(&bad, &gz[..gz.len() / 2]).unwrap();
    files.insert(3, bad.clone());

    let refdb = "fh_cpi_bad_ref";
    fresh(refdb);
    for f in files.iter().filter(|f| **f != bad) {
        flamehouse::ingest::continuous::load_pprof(engine(), f, &copts(refdb)).unwrap();
    }
    assert_eq!(cpu_total(refdb), want);

    let db = "fh_cpi_bad";
    fresh(db);
    let (r, events) = load(engine(), &files, &copts(db), 1_000_000);
    let s = r.unwrap();
    assert_eq!(s.failed, 1);
    assert_eq!(s.profiles, 6);
    assert_eq!(s.batches, 1, "one batch for all: {s:?}");
    assert_eq!(s.already_stored, 0);
    let failed: Vec<&String> = events.iter().filter(|e| e.starts_with("failed")).collect();
    assert_eq!(failed.len(), 1, "{events:?}");
    assert!(failed[0].contains(&bad.display().to_string()), "{failed:?}");
    assert!(!failed[0].contains('\n'));
    assert_eq!(cpu_total(db), want);
    assert_eq!(state(db), state(refdb));
    // One insert per table: one part each (merges are not that quick).
    assert_eq!(
        q(&format!(
            "SELECT count() FROM system.parts WHERE database = '{db}' AND table = 'cp_samples'"
        )),
        "1\n"
    );
    // Again, with the bad file replaced by a good one: only it is new.
    let extra = write_profile(&bad, 99, now + 100_000);
    let (r, _) = load(engine(), &files, &copts(db), 1_000_000);
    let s = r.unwrap();
    assert_eq!((s.failed, s.profiles, s.already_stored), (0, 7, 6));
    assert_eq!(cpu_total(db), want + extra);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A batched load that stops at any table of its second batch, run again
/// with other batches (every file its own batch, and more files), stores
/// exactly what one clean load stores.
#[test]
fn a_stopped_batched_load_run_again_with_other_batches_stores_each_profile_once() {
    let dir = temp_path("cpingest-stop");
    let now = recent_ms();
    let files: Vec<PathBuf> = (0..8)
        .map(|i| {
            let p = dir.join(format!("s{i}.pb.gz"));
            write_profile(&p, i, now + i * 10_000);
            p
        })
        .collect();
    let refdb = "fh_cpi_stop_ref";
    fresh(refdb);
    load(engine(), &files, &copts(refdb), 1_000_000).0.unwrap();
    let want = state(refdb);
    // A batch is about 3 files (rows of one file: 2 types x 5..8 stacks).
    let rows_per_batch = 30;
    for (i, table) in [
        "frames",
        "stacks",
        "cp_series",
        "cp_stacks",
        "cp_samples",
        "cp_profiles",
    ]
    .into_iter()
    .enumerate()
    {
        let db = format!("fh_cpi_stop_{i}");
        fresh(&db);
        let failing = Spy::failing(table, 1);
        let (r, events) = load(&failing, &files[..6], &copts(&db), rows_per_batch);
        let e = r.unwrap_err().to_string();
        assert!(e.contains(table), "{e}");
        let stored = events.iter().filter(|e| e.starts_with("stored")).count();
        assert!(
            (1..6).contains(&stored),
            "the first batch stored: {events:?}"
        );
        load(engine(), &files, &copts(&db), 1).0.unwrap();
        assert_eq!(state(&db), want, "stopped at {table}, then run again");
        let (r, _) = load(engine(), &files, &copts(&db), 1_000_000);
        assert_eq!(r.unwrap().already_stored, 8);
        assert_eq!(state(&db), want, "and once more");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A profile whose samples were cut inside one insert (the engine wrote
/// part of it) gets only its missing rows on the next load.
#[test]
fn samples_cut_inside_an_insert_are_completed() {
    let dir = temp_path("cpingest-cut");
    let p = dir.join("c.pb.gz");
    let want = write_profile(&p, 3, now_ms() - 60_000);
    let db = "fh_cpi_cut";
    fresh(db);
    let refdb = "fh_cpi_cut_ref";
    fresh(refdb);
    load(engine(), std::slice::from_ref(&p), &copts(refdb), 1)
        .0
        .unwrap();
    // Half of the sample rows, as a cut insert leaves them.
    let bytes = std::fs::read(&p).unwrap();
    let decoded = flamehouse::formats::pprof::decode(&p, &bytes, &Default::default()).unwrap();
    // The content id hashes the profile as decompressed (by gzip here).
    let raw = std::process::Command::new("gzip")
        .arg("-dc")
        .arg(&p)
        .output()
        .unwrap();
    assert!(raw.status.success() && !raw.stdout.is_empty());
    let rows = pprof_rows(
        &decoded,
        &p.canonicalize().unwrap().display().to_string(),
        flamehouse::storage::rows::stable_hash(&[&raw.stdout]),
        &copts(db),
    )
    .unwrap();
    let refid: u64 = q(&format!("SELECT any(profile_id) FROM {refdb}.cp_profiles"))
        .trim()
        .parse()
        .unwrap();
    assert_eq!(rows.profile_id, refid, "the same profile id as the load's");
    let half = rows.samples.len() / 2;
    assert!(half > 0);
    flamehouse::storage::insert(
        engine(),
        &db.parse().unwrap(),
        &rows.samples[..half],
        "cut-test",
    )
    .unwrap();
    let (r, _) = load(engine(), std::slice::from_ref(&p), &copts(db), 1);
    let s = r.unwrap();
    assert_eq!(s.sample_rows, rows.samples.len() - half);
    assert_eq!(cpu_total(db), want);
    assert_eq!(state(db), state(refdb));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A load killed after `cp_samples` took a profile's rows but before the
/// views' tables took theirs (an INSERT stores its part, then the views'
/// parts) left the rollups without them, and the next load found the
/// samples whole and sent nothing: the hourly and per-minute answers were
/// empty for good. The next load now makes the rollups whole; and a load
/// killed after the views, before the profile rows, gets nothing twice.
#[test]
fn rollups_are_made_whole_after_a_load_killed_between_samples_and_views() {
    let dir = temp_path("cpingest-views");
    let p = dir.join("v.pb.gz");
    let want = write_profile(&p, 5, now_ms() - 60_000);
    let refdb = "fh_cpi_views_ref";
    fresh(refdb);
    load(engine(), std::slice::from_ref(&p), &copts(refdb), 1)
        .0
        .unwrap();
    let rollups = |db: &str| {
        q(&format!(
            "SELECT (SELECT sum(value) FROM {db}.cp_samples_1m), (SELECT sum(value) FROM {db}.cp_samples_1h), \
                    (SELECT count() FROM {db}.cp_samples_1h)"
        ))
    };
    for (db, views_lost) in [("fh_cpi_views_lost", true), ("fh_cpi_views_kept", false)] {
        fresh(db);
        // The interrupted load: every sample row stored (with the views'),
        // no profile row; then, in the first case, the views' rows lost.
        load(engine(), std::slice::from_ref(&p), &copts(db), 1)
            .0
            .unwrap();
        q(&format!("TRUNCATE TABLE {db}.cp_profiles"));
        if views_lost {
            for t in ["cp_samples_1m", "cp_samples_1h", "cp_series_profiles"] {
                q(&format!("TRUNCATE TABLE {db}.{t}"));
            }
            assert_eq!(
                q(&format!("SELECT count() FROM {db}.cp_samples_1h")).trim(),
                "0"
            );
        }
        let (r, _) = load(engine(), std::slice::from_ref(&p), &copts(db), 1);
        let s = r.unwrap();
        assert_eq!(s.sample_rows, 0, "{db}: the samples were there");
        assert_eq!(cpu_total(db), want, "{db}");
        assert_eq!(rollups(db), rollups(refdb), "{db}");
        assert_eq!(state(db), state(refdb), "{db}");
        // Once more: listed now, nothing moves.
        load(engine(), std::slice::from_ref(&p), &copts(db), 1)
            .0
            .unwrap();
        assert_eq!(rollups(db), rollups(refdb), "{db}, again");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn bin() -> PathBuf {
    flamehouse_tests::cli_binary()
}

/// Runs `flamehouse ARGS --data DATA`: exit code, stdout, stderr.
fn cli(data: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin())
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `flamehouse load` of many files: a profile older than the retention is
/// one warning line (the file, its time, the retention), counted in the
/// summary and not stored; a bad file in the middle is one line naming it;
/// the exit status says a file failed; the others are stored once.
#[test]
fn load_warns_of_profiles_older_than_the_retention() {
    let dir = temp_path("cpingest-cli");
    let data = dir.join("data");
    let now = recent_ms();
    let day = 86_400_000;
    let new1 = dir.join("new1.pb.gz");
    let old = dir.join("old.pb.gz");
    let bad = dir.join("bad.pb.gz");
    let new2 = dir.join("new2.pb.gz");
    let want = write_profile(&new1, 1, now) + write_profile(&new2, 2, now - 2 * day);
    let old_ms = now - 10 * day;
    write_profile(&old, 3, old_ms);
    std::fs::write(&bad, b"\x1f\x8b\x08\x00garbage").unwrap();
    let run = |args: &[&str]| cli(&data, args);
    let (code, out, _) = run(&["init", "--retention", "7"]);
    assert_eq!(code, Some(0), "{out}");
    let paths: Vec<String> = [&new1, &old, &bad, &new2]
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let mut args = vec!["load"];
    args.extend(paths.iter().map(String::as_str));
    let (code, out, err) = run(&args);
    assert_eq!(code, Some(1), "{out}\n{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    let old_time = flamehouse::flame::format_utc_ms(old_ms);
    assert!(
        lines[0].contains("old.pb.gz")
            && lines[0].contains(&old_time)
            && lines[0].contains("7 days")
            && lines[0].contains("warning"),
        "{err}"
    );
    assert!(lines[1].contains("bad.pb.gz"), "{err}");
    assert_eq!(lines[2], "flamehouse: 1 of 4 files failed to load");
    assert!(
        out.contains("continuous: 4 files, 3 profiles (0 already stored, 1 outside the retention, not stored)"),
        "{out}"
    );
    let sql = |s: &str| run(&["sql", s]).1.trim().to_string();
    assert_eq!(
        sql("SELECT sum(value) FROM flamehouse.cp_samples WHERE profile_type = 'cpu:nanoseconds'"),
        want.to_string()
    );
    assert_eq!(
        sql("SELECT count() FROM flamehouse.cp_profiles WHERE source LIKE '%old.pb.gz'"),
        "0"
    );
    // Run again: nothing new; the warning again.
    let (_, out, err) = run(&args);
    assert!(out.contains("(2 already stored, 1 outside"), "{out}");
    assert!(err.contains("old.pb.gz"), "{err}");
    assert_eq!(
        sql("SELECT count(), sum(value) FROM flamehouse.cp_samples WHERE profile_type = 'cpu:nanoseconds'")
            .split('\t')
            .nth(1)
            .unwrap(),
        want.to_string()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A profile whose day plus the retention is past the engine's last Date
/// (2149-06-06) would be dropped at the next merge (the TTL's date wraps
/// to 1970): it is not stored, with a warning saying why, as a profile
/// older than the retention is; a profile of today is stored and kept.
#[test]
fn a_profile_whose_ttl_date_wraps_is_not_stored() {
    let dir = temp_path("cpingest-wrap");
    let data = dir.join("data");
    let now = recent_ms();
    let day = 86_400_000i64;
    let today = dir.join("today.pb.gz");
    let far = dir.join("far.pb.gz");
    let want = write_profile(&today, 1, now);
    // 2050-01-01 + 36,500 days is 2149-12-06.
    let far_ms = 29_220 * day;
    write_profile(&far, 2, far_ms);
    let run = |args: &[&str]| {
        let (code, out, err) = cli(&data, args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        (out, err)
    };
    run(&["init", "--retention", "36500"]);
    let (far_s, today_s) = (far.display().to_string(), today.display().to_string());
    let (out, err) = run(&["load", &today_s, &far_s]);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&far_s)
            && err.contains(&flamehouse::flame::format_utc_ms(far_ms))
            && err.contains("2149-06-06")
            && err.contains("36500 days")
            && err.contains("not stored"),
        "{err}"
    );
    assert!(out.contains("1 outside the retention, not stored"), "{out}");
    let sql = |s: &str| run(&["sql", s]).0.trim().to_string();
    let stored = || {
        sql("SELECT count(), sum(value) FROM flamehouse.cp_samples \
             WHERE profile_type = 'cpu:nanoseconds'")
    };
    let (rows, sum) = stored()
        .split_once('\t')
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .unwrap();
    assert_eq!(sum, want.to_string(), "only today's profile: {rows} rows");
    assert_eq!(sql("SELECT count() FROM flamehouse.cp_profiles WHERE ts < '2000-01-01' OR ts > '2049-01-01'"), "0");
    // Merged (the TTL applies): today's profile stays whole.
    run(&["compact"]);
    assert_eq!(stored(), format!("{rows}\t{want}"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A profile whose own time is past what the engine's `DateTime` holds
/// (2106-02-07) is refused in one line naming the file and asking for
/// --time, the other files still loaded; with --time it loads.
#[test]
fn a_profile_dated_past_2106_asks_for_time() {
    let dir = temp_path("cpingest-late");
    let data = dir.join("data");
    let (late, today) = (dir.join("late.pb.gz"), dir.join("today.pb.gz"));
    // 2107-01-01.
    write_profile(&late, 1, 50_038 * 86_400_000);
    write_profile(&today, 2, recent_ms());
    let (late_s, today_s) = (late.display().to_string(), today.display().to_string());
    let (code, out, err) = cli(&data, &["load", &late_s, &today_s]);
    assert_eq!(code, Some(1), "{out}{err}");
    let line = err
        .lines()
        .find(|l| l.contains(&late_s))
        .unwrap_or_default();
    assert!(
        line.contains("outside what the engine stores") && line.ends_with("give --time"),
        "{err}"
    );
    assert!(err.contains("1 of 2 files failed to load"), "{err}");
    assert!(out.contains("1 profile ("), "{out}");
    let at = (recent_ms() / 1000).to_string();
    let (code, out, err) = cli(&data, &["load", &late_s, "--time", &at]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("1 profile (0 already stored, 0 outside"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `init --retention` over stored profiles whose day plus the retention
/// wraps past 2149-06-06 says so, not that they are old (it counted them
/// as older than the retention: the wrapped day is in 1970).
#[test]
fn a_retention_that_wraps_stored_profiles_says_so() {
    let dir = temp_path("cpingest-wrap-init");
    let data = dir.join("data");
    let far = dir.join("far.pb.gz");
    // 2050-01-01: stored under the default retention.
    let far_ms = 29_220 * 86_400_000i64;
    write_profile(&far, 2, far_ms);
    let (code, _, err) = cli(&data, &["load", &far.display().to_string()]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = cli(&data, &["init", "--retention", "36500"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(!err.contains("older than"), "{err}");
    assert!(
        err.contains("1 stored profile (2050-01-01 to 2050-01-01) dated so late that 36500 days after them is past 2149-06-06"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first batches of a load are small and grow (1/32 of `batch_rows`,
/// then twice the last): the engine stores them while the readers go on.
/// The batch count is the one a plain simulation of that rule over the
/// files' row counts gives, and the database holds what a one-batch load of the same files holds.
#[test]
fn first_batches_are_small_and_grow() {
    let dir = temp_path("cpingest-grow");
    let now = recent_ms();
    let files: Vec<PathBuf> = (0..24)
        .map(|i| {
            let p = dir.join(format!("g{i}.pb.gz"));
            write_profile(&p, i, now + i * 10_000);
            p
        })
        .collect();
    let refdb = "fh_cpi_grow_ref";
    fresh(refdb);
    let (r, _) = load(engine(), &files, &copts(refdb), 1_000_000);
    assert_eq!(r.unwrap().batches, 1);

    let db = "fh_cpi_grow";
    fresh(db);
    let batch_rows = 640;
    // Rows of each file, in the order they are reported.
    let mut rows: Vec<usize> = Vec::new();
    let s = load_files(
        engine(),
        &files,
        &copts(db),
        &BatchOptions {
            batch_rows,
            ..Default::default()
        },
        &mut |e| {
            if let FileEvent::Stored(p) = e {
                rows.push(p.iter().map(|s| s.sample_rows).sum());
            }
        },
    )
    .unwrap();
    assert_eq!(state(db), state(refdb));
    // The rule, simulated over the files' rows.
    assert_eq!(rows.len(), files.len());
    let (mut t, mut pending, mut batches, mut sizes) = (batch_rows / 32, 0, 0, Vec::new());
    for r in &rows {
        pending += r;
        if pending >= t {
            batches += 1;
            sizes.push(pending);
            pending = 0;
            t = (t * 2).min(batch_rows);
        }
    }
    if pending > 0 {
        batches += 1;
        sizes.push(pending);
    }
    assert!(batches >= 4, "the files make several batches: {sizes:?}");
    assert!(sizes[0] < sizes[1] && sizes[1] < sizes[2], "{sizes:?}");
    assert_eq!(s.batches, batches, "{sizes:?} {s:?}");
    assert_eq!(s.sample_rows, rows.iter().sum::<usize>());
}

/// A read-ahead of one byte (each reader waits until its last file is
/// taken before it sends the next) stores what the default stores, with
/// one, two and three readers and a bad file among the others; a load whose
/// storer stops at an error ends with it instead of leaving readers waiting
/// for a taker.
#[test]
fn a_read_ahead_of_one_byte_stores_the_same_and_stops_at_an_error() {
    let dir = temp_path("cpingest-ahead");
    let now = recent_ms();
    let mut files: Vec<PathBuf> = (0..12)
        .map(|i| {
            let p = dir.join(format!("a{i}.pb.gz"));
            write_profile(&p, i, now + i * 10_000);
            p
        })
        .collect();
    let bad = dir.join("bad.pb.gz");
    std::fs::write(&bad, b"\x1f\x8b not gzip").unwrap();
    files.insert(5, bad);
    let refdb = "fh_cpi_ahead_ref";
    fresh(refdb);
    let (r, _) = load(engine(), &files, &copts(refdb), 1_000_000);
    assert_eq!(r.unwrap().failed, 1);
    let want = state(refdb);
    let tiny = |readers: usize, batch_rows: usize| BatchOptions {
        batch_rows,
        readers,
        read_ahead_bytes: 1,
        ..Default::default()
    };
    for readers in 1..=3 {
        let db = format!("fh_cpi_ahead_{readers}");
        fresh(&db);
        let mut stored = 0;
        let s = load_files(
            engine(),
            &files,
            &copts(&db),
            &tiny(readers, 40),
            &mut |e| {
                if let FileEvent::Stored(p) = e {
                    stored += p.len();
                }
            },
        )
        .unwrap();
        assert_eq!((s.failed, s.profiles, stored), (1, 12, 12), "{s:?}");
        assert_eq!(state(&db), want, "{readers} readers");
    }
    let db = "fh_cpi_ahead_stop";
    fresh(db);
    let failing = Spy::failing("cp_samples", 1);
    let e = load_files(&failing, &files, &copts(db), &tiny(2, 1), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("cp_samples"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The granules `EXPLAIN indexes = 1` says skip index `name` keeps for
/// `sql`, as (kept, of).
fn skip_granules(sql: &str, name: &str) -> (u64, u64) {
    let plan = q(&format!("EXPLAIN indexes = 1 {sql}"));
    let lines: Vec<&str> = plan.lines().map(str::trim).collect();
    let at = lines
        .iter()
        .position(|l| *l == format!("Name: {name}"))
        .unwrap_or_else(|| panic!("no skip index {name} in the plan:\n{plan}"));
    let g = lines[at..]
        .iter()
        .find_map(|l| l.strip_prefix("Granules: "))
        .unwrap_or_else(|| panic!("no granule count after {name}:\n{plan}"));
    let (a, b) = g.split_once('/').unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

/// What a batch asks before storing (which of its profiles are listed, how
/// many sample rows each has) is found through a bloom filter on
/// `profile_id` (migration 12): the granules that cannot hold an id are not
/// read, so the lookups do not read the whole `profile_id` column of
/// everything stored. An id that is stored keeps its granules, one that is
/// not keeps none (these ids are checked: no false positive).
#[test]
fn lookups_by_profile_id_skip_the_granules_without_it() {
    let dir = temp_path("cpingest-lookup");
    let db = "fh_cpi_lookup";
    fresh(db);
    let files: Vec<PathBuf> = (0..8)
        .map(|i| {
            let p = dir.join(format!("l{i}.pb.gz"));
            write_profile(&p, i, recent_ms() + i * 1000);
            p
        })
        .collect();
    load(engine(), &files, &copts(db), 1).0.unwrap();
    q(&format!("OPTIMIZE TABLE {db}.cp_samples FINAL"));
    q(&format!("OPTIMIZE TABLE {db}.cp_profiles FINAL"));
    let stored: u64 = q(&format!("SELECT any(profile_id) FROM {db}.cp_profiles"))
        .trim()
        .parse()
        .unwrap();
    // The two lookups of `store_batch`, as it sends them.
    let counts = |id: u64| {
        format!(
            "SELECT profile_id, count() FROM {db}.cp_samples WHERE profile_id IN ({id}) GROUP BY profile_id"
        )
    };
    let listed = |id: u64| {
        format!("SELECT DISTINCT profile_id, profile_type FROM {db}.cp_profiles WHERE profile_id IN ({id})")
    };
    // Ids between the smallest and the largest stored (outside, the
    // engine's own min-max statistics of the column skip the part already)
    // and not stored: the filter keeps no granule for nearly all of them
    // (0.1% false positives).
    let (lo, hi): (u64, u64) = {
        let r = q(&format!(
            "SELECT min(profile_id), max(profile_id) FROM {db}.cp_samples"
        ));
        let (a, b) = r.trim().split_once('\t').unwrap();
        (a.parse().unwrap(), b.parse().unwrap())
    };
    let ids: Vec<u64> = (1..=20u64).map(|k| lo + (hi - lo) / 21 * k).collect();
    let stored_ids = q(&format!("SELECT DISTINCT profile_id FROM {db}.cp_samples"));
    assert!(ids
        .iter()
        .all(|id| !stored_ids.lines().any(|l| l.trim() == id.to_string())));
    for (what, sql) in [
        ("counts", &counts as &dyn Fn(u64) -> String),
        ("listed", &listed),
    ] {
        let skipped = ids
            .iter()
            .filter(|&&id| skip_granules(&sql(id), "profile_idx") == (0, 1))
            .count();
        assert!(skipped >= 18, "{what}: {skipped} of 20 unknown ids skipped");
    }
    assert_eq!(skip_granules(&counts(stored), "profile_idx"), (1, 1));
    assert_eq!(skip_granules(&listed(stored), "profile_idx"), (1, 1));
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a batch asks before storing is one round trip when its ids fit one
/// query (10,000), and one query per table and chunk of 10,000 ids when
/// not (here 12,000 distinct stacks and frames); either way every profile
/// is stored once, and a reload finds everything (it inserts nothing: the
/// engine's deduplication tokens would otherwise hide a lookup that missed).
#[test]
fn a_batch_asks_in_one_round_trip_or_in_chunks() {
    let dir = temp_path("cpingest-chunks");
    for (n, chunked) in [(300i64, false), (12_000, true)] {
        let db = format!("fh_cpi_chunks_{n}");
        fresh(&db);
        let p = dir.join(format!("big{n}.pb.gz"));
        let mut w = PprofWriter::new(
            &[("samples", "count"), ("cpu", "nanoseconds")],
            ("cpu", "nanoseconds"),
            10_000_000,
        );
        w.set_time(recent_ms() * 1_000_000, 10_000_000_000);
        let mut want = 0;
        for i in 0..n {
            let leaf = format!("pkg.leaf{i}");
            w.add_sample(&[&leaf, "main.main"], &[1, 10_000_000 + i], &[]);
            want += 10_000_000 + i;
        }
        std::fs::write(&p, w.encode_gzip().unwrap()).unwrap();
        let first = Spy::default();
        let s = load(&first, std::slice::from_ref(&p), &copts(&db), 1_000_000)
            .0
            .unwrap();
        assert_eq!((s.profiles, s.already_stored), (1, 0), "{s:?}");
        assert_eq!(cpu_total(&db), want);
        assert_eq!(
            q(&format!("SELECT count() FROM {db}.stacks")).trim(),
            n.to_string()
        );
        // The lookups (the tagged `SELECT`s of `store_batch`).
        let lookups: Vec<String> = first
            .queries
            .lock()
            .unwrap()
            .iter()
            .filter(|q| q.starts_with("SELECT DISTINCT '") || q.starts_with("SELECT '"))
            .cloned()
            .collect();
        if chunked {
            // frames, stacks, series, cp_stacks, profiles, counts; the
            // frames, stacks and cp_stacks (12,000 each) in two chunks each.
            assert_eq!(
                lookups.len(),
                9,
                "{:?}",
                lookups.iter().map(|l| &l[..40]).collect::<Vec<_>>()
            );
            assert!(lookups.iter().all(|l| !l.contains(" UNION ALL ")));
        } else {
            assert_eq!(lookups.len(), 1);
            assert_eq!(lookups[0].matches(" UNION ALL ").count(), 5);
        }
        let before = state(&db);
        let again = Spy::default();
        let s = load(&again, std::slice::from_ref(&p), &copts(&db), 1_000_000)
            .0
            .unwrap();
        assert_eq!(s.already_stored, 1);
        assert_eq!(*again.inserts.lock().unwrap(), Vec::<String>::new(), "{n}");
        assert_eq!(state(&db), before);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
