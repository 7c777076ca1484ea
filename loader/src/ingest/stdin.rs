//! `-` as a file to load: standard input, spooled to a file first (`perf
//! script | flamehouse load -`, `bpftrace ... | flamehouse load -`), because
//! every reader detects its format from the first bytes and some read a
//! file twice (format detection, then the reader). The copy goes to disk,
//! not memory, so input of any size keeps memory bounded; the readers'
//! own size caps apply to it as to any file. A copy left behind by a load
//! that was killed (`kill -9`: no destructor runs) is removed by the next
//! `load -` ([`remove_stale`]): each load holds a lock on its copy's
//! directory, which the kernel lets go when the process ends, however it
//! ends.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The name that means standard input in a list of files.
pub const STDIN_NAME: &str = "-";

/// Standard input's copy: a file named `stdin` in a fresh directory under
/// the system's temporary directory, removed on drop. Its modification
/// time is when the input ended, which text formats take as the profile's
/// time unless `--time` says otherwise.
#[derive(Debug)]
pub struct Spooled {
    dir: PathBuf,
    /// The directory, open and locked (`flock`) while the copy is in use.
    _lock: Option<std::fs::File>,
}

impl Spooled {
    /// The copy's path.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        self.dir.join("stdin")
    }
}

impl Drop for Spooled {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The start of a copy's directory name, then the loader's pid, `-` and a
/// number.
const PREFIX: &str = "flamehouse-stdin-";

/// What a profile read from standard input names as its source (stored in
/// `cp_profiles.source`, shown by `profile list`) and errors name as its
/// file: the copy's path is gone once the load ends.
pub const STDIN_SOURCE: &str = "<stdin>";

/// [`STDIN_SOURCE`] when `path` is standard input's copy, `None` for any
/// other file.
#[must_use]
pub fn source_name(path: &Path) -> Option<&'static str> {
    let in_copy_dir = path
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|d| d.to_string_lossy().starts_with(PREFIX));
    (in_copy_dir && path.file_name().is_some_and(|f| f == "stdin")).then_some(STDIN_SOURCE)
}

/// How a loaded file is named in messages and stored rows: `<stdin>` for
/// the copy of standard input ([`source_name`]), else its path.
#[must_use]
pub fn shown_name(path: &Path) -> String {
    source_name(path).map_or_else(|| path.display().to_string(), String::from)
}

/// Locks `dir` (`flock`, exclusive) without waiting: the open directory
/// while it is held, `None` when another process holds it (or it cannot be
/// opened).
fn try_lock(dir: &Path) -> Option<std::fs::File> {
    use std::os::unix::io::AsRawFd;
    let f = std::fs::File::open(dir).ok()?;
    // SAFETY: flock on a descriptor this function owns; released when the
    // returned file is dropped, or by the kernel when the process ends.
    (unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0).then_some(f)
}

/// Removes the copies in `tmp` whose loader is gone: a load killed before
/// its destructors ran. A load locks its copy's directory before it writes
/// the copy and holds the lock to the end, so a directory that holds a
/// copy and can be locked is one nobody uses (whatever its pid says:
/// another pid namespace sharing `tmp` holds its locks too). Best effort:
/// what cannot be read or removed is left (and a directory killed before
/// its copy began, empty, stays).
pub fn remove_stale(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let dir = e.path();
        // Not a symbolic link: a directory of a loader's own making.
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if let Some(_held) = try_lock(&dir) {
            if dir.join("stdin").exists() {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
}

/// The files of a load as the readers take them: standard input by its
/// device name (`/dev/stdin`, `/dev/fd/0`) is `-`, since the engine
/// detaches fd 0 when it opens, after which that name reads `/dev/null`;
/// a named pipe (`<(zcat x.gz)`, a FIFO) or a socket is refused, since a
/// profile is read twice (its format detected first, which it failed as
/// "Illegal seek"): `-` takes it, copied first.
///
/// # Errors
/// [`Error::Usage`] naming the pipe and how to give it.
pub fn inputs(files: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    use std::os::unix::fs::FileTypeExt;
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        if ["/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"]
            .iter()
            .any(|n| f.as_os_str() == *n)
        {
            out.push(PathBuf::from(STDIN_NAME));
            continue;
        }
        if f.as_os_str() != STDIN_NAME
            && std::fs::metadata(&f)
                .is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_socket())
        {
            return Err(Error::Usage(format!(
                "{}: a pipe, not a file (a profile is read twice: its format is detected \
                 first): give it on standard input, `flamehouse load - < {}` or \
                 `COMMAND | flamehouse load -`",
                f.display(),
                f.display()
            )));
        }
        out.push(f);
    }
    Ok(out)
}

/// How much of standard input is read to tell text from binary input.
const FIRST_BYTES: usize = 64 << 10;

/// Copies standard input to a file, when `files` names it (`-`, once),
/// and returns `files` with the copy's path in its place. Text (its first
/// 64 KiB as [`looks_like_text`](crate::formats::text::looks_like_text)
/// says) is copied up to `max_text_bytes` (`--max-text-mib`, what a text
/// file is read whole up to): past it the copy stops with that limit's
/// error, not at a full temporary disk. A pprof profile (binary, not
/// starting with a zero byte) is copied up to `max_profile_bytes`
/// (`--max-decompressed-mib`, with 1% and 1 MiB for compression's
/// framing); a MemHawk stream (its first byte is zero) whole, as its
/// records are read one at a time, its framing followed as it passes: a
/// record length of 0 or past `max_record_len` (`--max-record-mib`), which
/// the stream's reader would refuse, stops the copy in one line naming the
/// byte (zeros without end were copied until the disk was full).
///
/// # Errors
/// `-` given twice, standard input a terminal or empty, text past
/// `max_text_bytes`, or the copy failed (the temporary directory's path in
/// the message).
pub fn spool_stdin(
    files: &[PathBuf],
    max_text_bytes: u64,
    max_profile_bytes: u64,
    max_record_len: u64,
) -> Result<(Vec<PathBuf>, Option<Spooled>)> {
    let is_stdin = |p: &PathBuf| p.as_os_str() == STDIN_NAME;
    match files.iter().filter(|p| is_stdin(p)).count() {
        0 => return Ok((files.to_vec(), None)),
        1 => {}
        _ => {
            return Err(Error::Usage(
                "`-` (standard input) can be given once".into(),
            ))
        }
    }
    // A terminal would wait for typed input that is no profile.
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(Error::Usage(
            "`-` reads a profile from standard input, which is a terminal: pipe one in \
             (`perf script | flamehouse load -`)"
                .into(),
        ));
    }
    remove_stale(&std::env::temp_dir());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("{PREFIX}{}-{nanos}", std::process::id()));
    let file_err = |path: &Path| {
        let path = path.to_owned();
        move |cause| Error::File { path, cause }
    };
    std::fs::create_dir_all(&dir).map_err(file_err(&dir))?;
    // Locked before the copy exists, so that no other load takes it for a
    // killed one's (see `remove_stale`).
    let lock = try_lock(&dir);
    let spooled = Spooled { dir, _lock: lock };
    let path = spooled.path();
    let mut out = std::fs::File::create(&path).map_err(file_err(&path))?;
    let mut input = std::io::stdin().lock();
    // The first bytes tell text (capped) from binary input.
    let mut first = Vec::with_capacity(FIRST_BYTES);
    (&mut input)
        .take(FIRST_BYTES as u64)
        .read_to_end(&mut first)
        .map_err(file_err(&path))?;
    let text = crate::formats::text::looks_like_text(&first);
    // A MemHawk stream starts with its first record's 8-byte big-endian
    // length (a zero byte): records are read one at a time, so a stream
    // is copied whole. Anything else binary is one pprof profile, read
    // whole: compressed, it is no larger than what it decompresses to
    // (gzip's and zstd's framing aside), so past that cap it is refused.
    let stream = first.first() == Some(&0);
    let cap = if text {
        Some((
            max_text_bytes,
            "--max-text-mib",
            "a text profile is read whole",
        ))
    } else if stream {
        None
    } else {
        Some((
            max_profile_bytes.saturating_add(max_profile_bytes / 100 + (1 << 20)),
            "--max-decompressed-mib",
            "a pprof profile decompresses to",
        ))
    };
    out.write_all(&first).map_err(file_err(&path))?;
    let rest = match cap {
        // One byte past the cap tells a larger input from one at the cap.
        Some((max, ..)) => {
            let left = (max + 1).saturating_sub(first.len() as u64);
            std::io::copy(&mut (&mut input).take(left), &mut out).map_err(file_err(&path))?
        }
        // A MemHawk stream: whole, its framing followed as it passes.
        None => {
            let mut framing = Framing::new(max_record_len);
            framing.pass(&first)?;
            let mut buf = vec![0u8; 1 << 20];
            let mut copied = 0u64;
            loop {
                let n = match input.read(&mut buf) {
                    Ok(0) => break copied,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(file_err(&path)(e)),
                };
                framing.pass(&buf[..n])?;
                out.write_all(&buf[..n]).map_err(file_err(&path))?;
                copied += n as u64;
            }
        }
    };
    let copied = first.len() as u64 + rest;
    if let Some((max, flag, what)) = cap.filter(|(max, ..)| copied > *max) {
        return Err(Error::Usage(format!(
            "standard input (`-`): larger than {} MiB, the most {what} ({flag} raises it)",
            max >> 20
        )));
    }
    // Unlike a file just created, standard input does not grow later.
    if copied == 0 {
        return Err(Error::Usage(
            "standard input (`-`) was empty: no profile to load".into(),
        ));
    }
    let files = files
        .iter()
        .map(|p| if is_stdin(p) { path.clone() } else { p.clone() })
        .collect();
    Ok((files, Some(spooled)))
}

/// A MemHawk stream's framing followed byte by byte as standard input is
/// copied: an 8-byte big-endian length, then that many bytes, again.
struct Framing {
    max: u64,
    /// Where the stream is: `Some(k)` inside a length prefix (`k` of its 8
    /// bytes seen, in `prefix`), `None` inside a record (`left` bytes).
    at: Option<usize>,
    prefix: [u8; 8],
    left: u64,
    offset: u64,
}

impl Framing {
    fn new(max: u64) -> Self {
        Framing {
            max,
            at: Some(0),
            prefix: [0; 8],
            left: 0,
            offset: 0,
        }
    }

    /// The next bytes of the stream.
    fn pass(&mut self, mut b: &[u8]) -> Result<()> {
        while !b.is_empty() {
            match self.at {
                None => {
                    let n = self.left.min(b.len() as u64) as usize;
                    (self.left, b, self.offset) =
                        (self.left - n as u64, &b[n..], self.offset + n as u64);
                    if self.left == 0 {
                        self.at = Some(0);
                    }
                }
                Some(k) => {
                    let n = (8 - k).min(b.len());
                    self.prefix[k..k + n].copy_from_slice(&b[..n]);
                    (b, self.offset) = (&b[n..], self.offset + n as u64);
                    if k + n < 8 {
                        self.at = Some(k + n);
                        continue;
                    }
                    let len = u64::from_be_bytes(self.prefix);
                    let at = self.offset - 8;
                    if len == 0 || len > self.max {
                        return Err(Error::Usage(format!(
                            "standard input (`-`): a MemHawk stream (its first byte is 0) whose \
                             record at byte {at} has length {len}{}: no profile, not copied further",
                            if len == 0 {
                                String::new()
                            } else {
                                format!(
                                    ", past --max-record-mib ({} MiB)",
                                    self.max >> 20
                                )
                            }
                        )));
                    }
                    (self.at, self.left) = (None, len);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records are followed across the copy's reads; a zero length or
    /// one past the limit is refused naming its byte offset.
    #[test]
    fn a_streams_framing_is_followed_as_it_is_copied() {
        let mut stream = Vec::new();
        for len in [3u64, 1, 20] {
            stream.extend_from_slice(&len.to_be_bytes());
            stream.extend(std::iter::repeat_n(7u8, len as usize));
        }
        for step in [1, 3, 8, 9, 1000] {
            let mut f = Framing::new(100);
            for chunk in stream.chunks(step) {
                f.pass(chunk).unwrap();
            }
            assert_eq!(f.offset, stream.len() as u64);
        }
        let mut zeros = stream.clone();
        zeros.extend_from_slice(&[0; 64]);
        let e = Framing::new(100).pass(&zeros).unwrap_err().to_string();
        assert!(
            e.contains(&format!("record at byte {} has length 0", stream.len())),
            "{e}"
        );
        let e = Framing::new(10).pass(&stream).unwrap_err().to_string();
        assert!(
            e.contains("record at byte 20 has length 20, past --max-record-mib"),
            "{e}"
        );
    }

    #[test]
    fn copies_of_gone_loaders_are_removed_and_live_ones_kept() {
        let tmp = std::env::temp_dir().join(format!("fh-stale-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let gone = tmp.join(format!("{PREFIX}1-1"));
        let live = tmp.join(format!("{PREFIX}1-2"));
        let starting = tmp.join(format!("{PREFIX}1-3"));
        let other = tmp.join("flamehouse-other-4");
        for d in [&gone, &live, &starting, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        for d in [&gone, &live, &other] {
            std::fs::write(d.join("stdin"), "x").unwrap();
        }
        // A symbolic link with the prefix, to a directory with a copy.
        let link = tmp.join(format!("{PREFIX}1-5"));
        std::os::unix::fs::symlink(&other, &link).unwrap();
        // Held by a live load (a lock of another open file description
        // conflicts as another process's would).
        let held = try_lock(&live).unwrap();
        assert!(
            try_lock(&live).is_none(),
            "flock conflicts within a process"
        );
        remove_stale(&tmp);
        assert!(!gone.exists(), "unlocked with a copy: removed");
        assert!(live.join("stdin").exists(), "locked: kept");
        assert!(starting.exists(), "no copy yet: kept");
        assert!(
            other.join("stdin").exists() && link.exists(),
            "foreign: kept"
        );
        drop(held);
        remove_stale(&tmp);
        assert!(!live.exists(), "its lock let go: removed");
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
