//! Malformed input: a non-zero exit with one line on stderr, which
//! ClickHouse shows the user.

use flamehouse_tests::*;
use std::io::Write;
use std::process::{Command, Stdio};

fn run_udf(args: &[&str], input: &[u8]) -> (i32, String, Vec<u8>) {
    let mut child = Command::new(udf_binary())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.stdout,
    )
}

fn assert_one_line_error(args: &[&str], input: &[u8], needle: &str) {
    let (code, err, _) = run_udf(args, input);
    assert_ne!(code, 0, "{args:?} accepted {input:?}");
    assert_eq!(err.lines().count(), 1, "not one line: {err:?}");
    assert!(err.starts_with("flamehouse-udf: "), "{err}");
    assert!(err.contains(needle), "{err:?} lacks {needle:?}");
}

/// RowBinary of one tree row: samples [(['ab'], 5)] and an empty map.
fn rb_row() -> Vec<u8> {
    let mut v = vec![1, 1, 2, b'a', b'b'];
    v.extend_from_slice(&5i64.to_le_bytes());
    v.push(0);
    v
}

#[test]
fn truncated_rowbinary_is_rejected_at_every_cut() {
    let row = rb_row();
    let (code, _, out) = run_udf(&["tree", "--format", "RowBinary"], &row);
    assert_eq!(code, 0);
    // The whole row: Array(Tuple(level UInt32, label String, value Int64,
    // self Int64)) with the root `total` and the leaf `ab`, written out.
    let mut want = vec![2u8];
    for (level, label, value, own) in [(0u32, "total", 5i64, 0i64), (1, "ab", 5, 5)] {
        want.extend(level.to_le_bytes());
        want.push(label.len() as u8);
        want.extend(label.as_bytes());
        want.extend(value.to_le_bytes());
        want.extend(own.to_le_bytes());
    }
    assert_eq!(out, want);
    for cut in 1..row.len() {
        assert_one_line_error(&["tree", "--format", "RowBinary"], &row[..cut], "truncated");
    }
    // Pool mode: a chunk announcing two rows that carries one.
    let mut pooled = b"2\n".to_vec();
    pooled.extend_from_slice(&row);
    assert_one_line_error(
        &["tree", "--format", "RowBinary", "--pool"],
        &pooled,
        "row 2",
    );
}

#[test]
fn hostile_lengths_do_not_allocate_or_hang() {
    // A string claiming 2^62 bytes, and an array claiming 2^62 elements.
    let huge = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40];
    let mut s = vec![1, 1];
    s.extend_from_slice(&huge);
    assert_one_line_error(&["tree", "--format", "RowBinary"], &s, "max_row_bytes");
    let mut a = huge.to_vec();
    a.extend_from_slice(&[0; 3]);
    assert_one_line_error(&["fold", "--format", "RowBinary"], &a, "truncated");
    assert_one_line_error(
        &["tree", "--format", "RowBinary", "--max-row-bytes", "8"],
        &rb_row(),
        "max_row_bytes",
    );
}

#[test]
fn broken_tsv_is_rejected_with_row_and_offset() {
    let tsv = ["tree", "--format", "TabSeparated"];
    assert_one_line_error(&tsv, b"[(['a\\x4'],1)]\t{}\n", "bad \\x escape");
    assert_one_line_error(&tsv, b"[(['a'],1)]\t{}\n[(['a],1)]\t{}\n", "row 2");
    assert_one_line_error(&tsv, b"[(['a'],x)]\t{}\n", "expected an integer");
    assert_one_line_error(&tsv, b"[(['a'],1)]{}\n", "a tab between columns");
    assert_one_line_error(&tsv, b"[(['a'],1)]\t{}", "end of input");
    assert_one_line_error(&tsv, b"[(['a'],99999999999999999999)]\t{}\n", "Int64");
    assert_one_line_error(
        &["tree", "--format", "tsv", "--pool"],
        b"x\n",
        "chunk header",
    );
}

#[test]
fn engine_shows_the_udf_error_to_the_user() {
    // Calling the raw RowBinary function without the wrapper's cast sends
    // UInt8 where Int64 is declared: the process must fail loudly.
    let e = q_err(
        "SELECT flamehouse_tree_rowbinary([(['a'], toUInt8(1))], CAST(map() AS Map(String, String)))",
    );
    assert!(e.contains("flamehouse-udf: RowBinary input, row 1"), "{e}");
    let e = q_err("SELECT stackTreeWith([(['a'], 1)], map('max_nodez', '10'))");
    assert!(e.contains("option max_nodez: unknown option"), "{e}");
    let e = q_err("SELECT stackFoldWith([(['a'], 1)], map('focus', '('))");
    assert!(e.contains("option focus"), "{e}");
    // The pool recovers: the next call works.
    assert_eq!(q("SELECT stackFold([(['a'], 1)])"), "[('a',1)]\n");
}

/// The embedded engine reads inserted blocks through a pipe: a query
/// that fails before opening it, or in the middle of reading it, must return
/// the engine's error without hanging and store nothing. Several blocks
/// inserted at once (`insert_rowbinary_all`, each on a connection of its
/// own) are all stored, and a failing one is reported.
#[test]
fn engine_pipe_inserts_fail_cleanly_and_store_whole_blocks_once() {
    use flamehouse::storage::Backend;
    use std::time::{Duration, Instant};
    let e = engine();
    q("CREATE DATABASE IF NOT EXISTS pipe_test");
    q("CREATE TABLE IF NOT EXISTS pipe_test.t (a UInt64, b UInt64) ENGINE = MergeTree ORDER BY a \
       SETTINGS non_replicated_deduplication_window = 100");
    let structure = "a UInt64, b UInt64";
    // Larger than a pipe's buffer, so the feeder blocks while the engine reads.
    let n = 100_000u64;
    let mut rows = Vec::new();
    for i in 0..n {
        rows.extend(i.to_le_bytes());
        rows.extend((2 * i).to_le_bytes());
    }

    // No such table: the engine never opens the pipe.
    let t = Instant::now();
    let err = e
        .insert_rowbinary(
            &"pipe_test".parse().unwrap(),
            "missing",
            structure,
            &rows,
            "tok-missing",
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());

    // A hostile string length at the start: the engine stops reading early.
    let mut hostile = vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
    hostile.extend(std::iter::repeat_n(b'x', 2 << 20));
    let err = e
        .insert_rowbinary(
            &"pipe_test".parse().unwrap(),
            "t",
            "a String",
            &hostile,
            "tok-hostile",
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("TOO_LARGE_STRING_SIZE") && err.contains("at row 1"),
        "{err}"
    );

    // A torn last row: an error, and no row of the block is stored.
    let mut torn = rows.clone();
    torn.push(1);
    let err = e
        .insert_rowbinary(
            &"pipe_test".parse().unwrap(),
            "t",
            structure,
            &torn,
            "tok-torn",
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("CANNOT_READ_ALL_DATA") && err.contains(&format!("at row {}", n + 1)),
        "{err}"
    );
    assert_eq!(q("SELECT count() FROM pipe_test.t"), "0\n");

    // Whole rows, sent twice with one token: stored once, exactly.
    for _ in 0..2 {
        e.insert_rowbinary(
            &"pipe_test".parse().unwrap(),
            "t",
            structure,
            &rows,
            "tok-ok",
        )
        .unwrap();
    }
    assert_eq!(
        q("SELECT count(), sum(a), sum(b) FROM pipe_test.t"),
        format!("{n}\t{}\t{}\n", n * (n - 1) / 2, n * (n - 1))
    );

    // At once: three blocks into two tables, then the same with one bad.
    use flamehouse::storage::Insert;
    q("CREATE TABLE IF NOT EXISTS pipe_test.u (a UInt64, b UInt64) ENGINE = MergeTree ORDER BY a \
       SETTINGS non_replicated_deduplication_window = 100");
    let block = |table: &'static str, structure: &'static str, rows: &[u8], token: &str| Insert {
        table,
        structure,
        rows: rows.to_vec(),
        token: token.to_string(),
    };
    let half = &rows[..rows.len() / 2];
    let db: flamehouse::storage::ident::Ident = "pipe_test".parse().unwrap();
    e.insert_rowbinary_all(
        &db,
        &[
            block("u", "a UInt64, b UInt64", &rows, "all-1"),
            block("u", "a UInt64, b UInt64", half, "all-2"),
            block("t", "a UInt64, b UInt64", half, "all-3"),
        ],
    )
    .unwrap();
    let m = n / 2;
    assert_eq!(
        q("SELECT count(), sum(a) FROM pipe_test.u"),
        format!("{}\t{}\n", n + m, n * (n - 1) / 2 + m * (m - 1) / 2)
    );
    assert_eq!(q("SELECT count() FROM pipe_test.t"), format!("{}\n", n + m));
    let t = Instant::now();
    let err = e
        .insert_rowbinary_all(
            &db,
            &[
                block("u", "a UInt64, b UInt64", &rows, "all-4"),
                block("missing", "a UInt64, b UInt64", &rows, "all-5"),
                block("u", "a UInt64, b UInt64", &torn, "all-6"),
            ],
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("missing"),
        "the first failure, in order: {err}"
    );
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert_eq!(
        q("SELECT count() FROM pipe_test.u"),
        format!("{}\n", 2 * n + m),
        "the good block is stored, the torn one is not"
    );
    // No file is left behind (a named pipe per insert was, until removed).
    let tmp = e.data_dir().join("tmp");
    let pipes = std::fs::read_dir(&tmp)
        .map(|d| {
            d.filter_map(|f| f.ok())
                .filter(|f| f.file_name().to_string_lossy().starts_with("insert-"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(pipes, 0, "{}", tmp.display());
}
