//! `load --watch` follows a file while it grows, in arbitrary chunks (so
//! records are torn mid-write), and ends with exactly what a single load of
//! the finished file stores.

use flamehouse::fixture::{compile_workload, generate, FixtureOptions};
use flamehouse::load::{load_file, LoadOptions};
use flamehouse::schema::{migrate, SchemaOptions};
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
    let dir = std::env::temp_dir().join(format!("flamehouse-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
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
