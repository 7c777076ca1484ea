//! Text profiles (perf script here) stored by builds before migration 10,
//! whose ids hash the file with FNV-1a, are not stored again when the same
//! file is loaded by this build (ids from XXH3): whole ones store nothing,
//! one cut short is finished under its old id. A fresh database never
//! computes the old hash.
//!
//! The "old build" is emulated: the profile's rows are written with the old profile
//! id (checked against FNV-1a and the old id recipe computed here), then
//! the database loses migration 10's column and record, and `migrate`
//! upgrades it as `flamehouse init` would.

use flamehouse::formats::perf::{Perf, PerfOptions};
use flamehouse::formats::{ProfileFormat, ReadOptions};
use flamehouse::ingest::continuous::{
    holds_legacy_text_profiles, reader_rows, store, with_legacy_identity, ContinuousOptions,
    ProfileRows, ID_SCHEME,
};
use flamehouse::ingest::cp_batch::{load_files, BatchOptions, FileEvent, FilesSummary};
use flamehouse::storage::insert;
use flamehouse::storage::rows::stable_hash;
use flamehouse::storage::schema::{migrate, SchemaOptions};
use flamehouse_fixtures::testing::temp_path;
use flamehouse_tests::*;
use std::path::{Path, PathBuf};

fn fresh(db: &str) {
    q(&format!("DROP DATABASE IF EXISTS {db}"));
    migrate(engine(), &schema(db)).unwrap();
}

fn schema(db: &str) -> SchemaOptions {
    SchemaOptions {
        database: db.parse().unwrap(),
        cluster: None,
    }
}

fn copts(db: &str) -> ContinuousOptions {
    ContinuousOptions {
        database: db.parse().unwrap(),
        service: Some("api".into()),
        ..Default::default()
    }
}

/// A copy of a recorded perf script (its mtime now: inside the retention).
fn perf_file(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(format!("{name}.perf-script.txt"));
    std::fs::copy(
        repo_root().join(format!("fixtures/continuous/perf/{name}.perf-script.txt")),
        &p,
    )
    .unwrap();
    std::fs::canonicalize(p).unwrap()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .into()
}

/// Every count and sum a load leaves, views included.
fn state(db: &str) -> String {
    q(&format!(
        "SELECT (SELECT count(), sum(value) FROM {db}.cp_samples), \
         (SELECT sum(value) FROM {db}.cp_samples_1m), (SELECT sum(value) FROM {db}.cp_samples_1h), \
         (SELECT count() FROM {db}.cp_series), (SELECT count() FROM {db}.stacks), \
         (SELECT count() FROM {db}.frames), (SELECT count(), sum(total) FROM {db}.cp_profiles)"
    ))
}

fn load(db: &str, files: &[PathBuf]) -> (FilesSummary, Vec<u64>) {
    let mut ids = Vec::new();
    let s = load_files(
        engine(),
        files,
        &copts(db),
        &BatchOptions::default(),
        &mut |e| match e {
            FileEvent::Stored(p) => ids.extend(p.iter().map(|s| s.profile_id)),
            FileEvent::Failed(f, e) => panic!("{}: {e}", f.display()),
            FileEvent::Expired { source, .. } => panic!("expired {source}"),
        },
    )
    .unwrap();
    (s, ids)
}

/// The id builds before migration 10 gave a perf script loaded with the
/// default options and `--service api`, computed here: FNV-1a 64 of the
/// bytes, then `stable_hash(format, hash, length, "service", "api")`.
fn old_id(path: &Path) -> u64 {
    let text = std::fs::read(path).unwrap();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in &text {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    stable_hash(&[
        b"perf",
        &h.to_le_bytes(),
        &(text.len() as u64).to_le_bytes(),
        b"service",
        b"api",
    ])
}

/// The id this build gives it: XXH3-64 of the bytes as the engine's own
/// `xxh3` computes it, tagged `xxh3`.
fn new_id(path: &Path) -> u64 {
    let h: u64 = q(&format!(
        "SELECT xxh3(raw_blob) FROM file({}, RawBLOB)",
        flamehouse::storage::sql_string(&path.display().to_string())
    ))
    .trim()
    .parse()
    .unwrap();
    let len = std::fs::metadata(path).unwrap().len();
    stable_hash(&[
        b"perf",
        b"xxh3",
        &h.to_le_bytes(),
        &len.to_le_bytes(),
        b"service",
        b"api",
    ])
}

/// Turns `db` (fully migrated) into a database of the build before
/// migration 10: no `id_scheme` column, migration 10 not recorded.
fn make_old(db: &str) {
    q(&format!(
        "ALTER TABLE {db}.cp_profiles DROP COLUMN id_scheme"
    ));
    q(&format!(
        "ALTER TABLE {db}.schema_migrations DELETE WHERE version = 10 SETTINGS mutations_sync = 1"
    ));
}

/// The rows an old build stored for `path`: the legacy id everywhere.
fn old_rows(path: &Path, db: &str) -> ProfileRows {
    let opts = copts(db);
    let read = ReadOptions {
        legacy_identity: true,
        ..Default::default()
    };
    let mut reader = Perf
        .open(std::fs::File::open(path).unwrap(), path, &read)
        .unwrap();
    let mut sym = flamehouse::symbolize::Symbolizer::new(Default::default());
    let mut rows = reader_rows(&mut *reader, &mut sym, &path.display().to_string(), &opts)
        .unwrap()
        .remove(0);
    let old = old_id(path);
    assert_eq!(
        rows.legacy_id,
        Some(old),
        "the legacy id is the old recipe's"
    );
    assert_ne!(rows.profile_id, old);
    rows.profile_id = old;
    for s in &mut rows.samples {
        s.profile_id = old;
    }
    for p in &mut rows.profiles {
        p.profile_id = old;
    }
    rows
}

/// Writes `rows` as the old build did (before [`make_old`] drops the
/// column); `with_profiles` false leaves the profile rows out (a load cut
/// before its last insert: dictionaries, series and samples stored).
fn store_old(db: &str, rows: &mut ProfileRows, with_profiles: bool) {
    let d = db.parse().unwrap();
    for p in &mut rows.profiles {
        p.id_scheme = 0;
    }
    if with_profiles {
        store(engine(), &d, rows).unwrap();
        return;
    }
    // Without profile rows `store` writes the dictionaries only.
    let dicts = ProfileRows {
        frames: rows.frames.clone(),
        stacks: rows.stacks.clone(),
        ..Default::default()
    };
    store(engine(), &d, &dicts).unwrap();
    let have = q(&format!("SELECT series_id FROM {db}.cp_series"));
    let series: Vec<_> = rows
        .series
        .iter()
        .filter(|s| !have.lines().any(|l| l == s.series_id.to_string()))
        .cloned()
        .collect();
    let tok = |t: &str| format!("old-{}-{t}", rows.profile_id);
    insert(engine(), &d, &series, &tok("series")).unwrap();
    insert(engine(), &d, &rows.samples, &tok("samples")).unwrap();
}

/// A whole profile of the old build, and one cut before its profile rows:
/// after the upgrade, loading both files again stores nothing twice (the
/// database then holds what a fresh load of the two files holds, under the
/// old ids), and another file is stored under the new scheme.
#[test]
fn text_profiles_of_earlier_builds_are_not_stored_twice() {
    let dir = temp_path("legacy-ids");
    let (fp, dwarf) = (perf_file(&dir, "burn.fp"), perf_file(&dir, "burn.dwarf"));
    let other = dir.join("other.perf-script.txt");
    // Another file: the same text with a blank line more.
    let mut t = std::fs::read_to_string(&fp).unwrap();
    t.push('\n');
    std::fs::write(&other, t).unwrap();
    let other = std::fs::canonicalize(other).unwrap();

    // The reference: this build's load of the two files into a fresh
    // database (its ids the new ones).
    let reference = "cp_legacy_ref";
    fresh(reference);
    assert!(!holds_legacy_text_profiles(engine(), &reference.parse().unwrap()).unwrap());
    let (s, ids) = load(reference, &[fp.clone(), dwarf.clone()]);
    assert_eq!((s.profiles, s.already_stored), (2, 0));
    assert_eq!(ids, vec![new_id(&fp), new_id(&dwarf)]);
    let want = state(reference);

    // The old database: fp whole, dwarf cut before its profile rows.
    let db = "cp_legacy_old";
    fresh(db);
    store_old(db, &mut old_rows(&fp, db), true);
    store_old(db, &mut old_rows(&dwarf, db), false);
    make_old(db);
    let before = state(db);
    assert_ne!(before, want, "dwarf's profile rows are missing");
    assert_eq!(migrate(engine(), &schema(db)).unwrap(), vec![10]);
    assert!(holds_legacy_text_profiles(engine(), &db.parse().unwrap()).unwrap());
    assert_eq!(
        q(&format!(
            "SELECT DISTINCT profile_id, id_scheme FROM {db}.cp_profiles"
        ))
        .trim(),
        format!("{}\t0", old_id(&fp))
    );

    // The same files again: fp already stored, dwarf finished under its
    // old id; nothing twice.
    let (s, ids) = load(db, &[fp.clone(), dwarf.clone()]);
    assert_eq!((s.profiles, s.already_stored), (2, 1), "{s:?}");
    assert_eq!(ids, vec![old_id(&fp), old_id(&dwarf)]);
    assert_eq!(state(db), want);
    assert_eq!(
        q(&format!(
            "SELECT DISTINCT profile_id, id_scheme FROM {db}.cp_profiles ORDER BY ALL"
        )),
        {
            let mut v = [old_id(&fp), old_id(&dwarf)];
            v.sort_unstable();
            format!("{}\t0\n{}\t0\n", v[0], v[1])
        }
    );
    assert_eq!(
        q(&format!(
            "SELECT uniqExact(profile_id) FROM {db}.cp_samples WHERE profile_id NOT IN ({}, {})",
            old_id(&fp),
            old_id(&dwarf)
        ))
        .trim(),
        "0"
    );
    // Once more: nothing.
    let (s, _) = load(db, &[fp.clone(), dwarf.clone()]);
    assert_eq!((s.profiles, s.already_stored, s.sample_rows), (2, 2, 0));
    assert_eq!(state(db), want);

    // A file never stored before: the new id and scheme.
    let (s, ids) = load(db, std::slice::from_ref(&other));
    assert_eq!((s.profiles, s.already_stored), (1, 0));
    assert_eq!(ids, vec![new_id(&other)]);
    assert_eq!(
        q(&format!(
            "SELECT DISTINCT id_scheme FROM {db}.cp_profiles WHERE profile_id = {}",
            new_id(&other)
        ))
        .trim(),
        ID_SCHEME.to_string()
    );
    // The single-file path too (`load_file`): nothing twice.
    let n = state(db);
    flamehouse::ingest::continuous::load_file(engine(), &fp, &copts(db)).unwrap();
    assert_eq!(state(db), n);
    q(&format!("DROP DATABASE {db}"));
    q(&format!("DROP DATABASE {reference}"));
}

/// A database without legacy text profiles (a fresh one, one with this
/// build's text profiles, one with pprof profiles only) does not ask the
/// readers for the legacy hash: the fast path.
#[test]
fn fresh_databases_skip_the_legacy_hash() {
    let dir = temp_path("legacy-fresh");
    let fp = perf_file(&dir, "burn.fp");
    let db = "cp_legacy_fresh";
    fresh(db);
    let d: flamehouse::storage::ident::Ident = db.parse().unwrap();
    assert!(
        !with_legacy_identity(engine(), &copts(db))
            .unwrap()
            .read
            .legacy_identity
    );
    load(db, std::slice::from_ref(&fp));
    assert!(
        !with_legacy_identity(engine(), &copts(db))
            .unwrap()
            .read
            .legacy_identity
    );
    // Old pprof rows (id_scheme 0: their ids did not change) do not count.
    q(&format!(
        "INSERT INTO {db}.cp_profiles (profile_id, profile_type, ts, format) VALUES (1, 'cpu:nanoseconds', now64(3), 'pprof')"
    ));
    assert!(!holds_legacy_text_profiles(engine(), &d).unwrap());
    // An old perf row does.
    q(&format!(
        "INSERT INTO {db}.cp_profiles (profile_id, profile_type, ts, format) VALUES (2, 'perf:x', now64(3), 'perf')"
    ));
    assert!(holds_legacy_text_profiles(engine(), &d).unwrap());
    assert!(
        with_legacy_identity(engine(), &copts(db))
            .unwrap()
            .read
            .legacy_identity
    );
    // Without the flag a reader gives no legacy identity; with it, the
    // old recipe's.
    for (flag, want) in [(false, 0), (true, 3)] {
        let read = ReadOptions {
            legacy_identity: flag,
            perf: PerfOptions::default(),
            ..Default::default()
        };
        let mut r = Perf
            .open(std::fs::File::open(&fp).unwrap(), &fp, &read)
            .unwrap();
        let src = std::iter::from_fn(|| r.next_event().unwrap())
            .find_map(|e| match e {
                flamehouse::model::Event::Source(s) => Some(s),
                _ => None,
            })
            .unwrap();
        assert_eq!(src.legacy_identity.len(), want);
        assert_eq!(src.identity[1], b"xxh3");
    }
    q(&format!("DROP DATABASE {db}"));
}

/// A pprof profile's id hashes the profile as decompressed (id scheme 2):
/// a gzipped and a raw copy of one profile are one profile. Builds before
/// it hashed a gzipped file's compressed bytes: a gzipped file they stored
/// is found under that id, not stored twice; a fresh database never
/// computes the old hash.
#[test]
fn pprof_profiles_of_earlier_builds_are_not_stored_twice() {
    let dir = temp_path("legacy-pprof");
    let fixture = |f: &str| repo_root().join("fixtures/continuous/pprof").join(f);
    let gz = dir.join("cpu.pb.gz");
    let raw = dir.join("cpu.pb");
    std::fs::copy(fixture("cpu.pb.gz"), &gz).unwrap();
    std::fs::copy(fixture("cpu.pb"), &raw).unwrap();
    // Dated an hour ago (inside the default retention), as `--time` does.
    let time_ns = (flamehouse::profiles::now_ms() - 3_600_000) as u64 * 1_000_000;
    let mut opts = copts("cp_legacy_pprof_ref");
    opts.decode.time_ns = Some(time_ns);
    let load_with = |db: &str, files: &[PathBuf]| {
        let mut ids = Vec::new();
        let o = ContinuousOptions {
            database: db.parse().unwrap(),
            ..opts.clone()
        };
        let s = load_files(engine(), files, &o, &BatchOptions::default(), &mut |e| {
            if let FileEvent::Stored(p) = e {
                ids.extend(p.iter().map(|s| s.profile_id));
            }
        })
        .unwrap();
        assert_eq!(s.failed, 0, "{s:?}");
        (s, ids)
    };

    // This build: the raw copy of a stored gzipped file is already stored.
    let reference = "cp_legacy_pprof_ref";
    fresh(reference);
    let (s, ids) = load_with(reference, &[gz.clone(), raw.clone()]);
    assert_eq!((s.profiles, s.already_stored), (2, 1), "{s:?}");
    assert_eq!(ids[0], ids[1]);
    let want = state(reference);
    let d: flamehouse::storage::ident::Ident = reference.parse().unwrap();
    assert!(!flamehouse::ingest::continuous::holds_legacy_pprof_profiles(engine(), &d).unwrap());

    // An earlier build's rows of the gzipped file: its id from the
    // compressed bytes (and `--time`), scheme 1.
    let db = "cp_legacy_pprof_old";
    fresh(db);
    let bytes = std::fs::read(&gz).unwrap();
    let extra = format!("time={time_ns}");
    let old_content = stable_hash(&[&bytes, extra.as_bytes()]);
    let mut profile = flamehouse::formats::pprof::decode(&gz, &bytes, &Default::default()).unwrap();
    profile.time_nanos = time_ns as i64;
    let mut reader = flamehouse::formats::pprof::reader::PprofReader::new(
        &profile,
        old_content,
        bytes.len() as u64,
    );
    let mut sym = flamehouse::symbolize::Symbolizer::new(Default::default());
    let o = ContinuousOptions {
        database: db.parse().unwrap(),
        ..opts.clone()
    };
    let mut rows = reader_rows(&mut reader, &mut sym, &gz.display().to_string(), &o)
        .unwrap()
        .remove(0);
    let old_id = rows.profile_id;
    assert_ne!(old_id, ids[0], "the old recipe gives another id");
    for p in &mut rows.profiles {
        p.id_scheme = 1;
    }
    store(engine(), &db.parse().unwrap(), &rows).unwrap();
    assert!(
        with_legacy_identity(engine(), &o)
            .unwrap()
            .read
            .legacy_pprof_identity
    );
    // Loaded again by this build: found under its old id, nothing twice.
    let (s, again) = load_with(db, std::slice::from_ref(&gz));
    assert_eq!((s.profiles, s.already_stored), (1, 1), "{s:?}");
    assert_eq!(again, vec![old_id]);
    // It holds what this build's load of the two copies holds.
    assert_eq!(state(db), want);
    for d in [reference, db] {
        q(&format!("DROP DATABASE {d}"));
    }
}
