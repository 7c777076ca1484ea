//! `-` as a file to load: standard input, spooled to a file first (`perf
//! script | flamehouse load -`, `bpftrace ... | flamehouse load -`), because
//! every reader detects its format from the first bytes and some read a
//! file twice (format detection, then the reader). The copy goes to disk,
//! not memory, so input of any size keeps memory bounded; the readers'
//! own size caps apply to it as to any file. A copy left behind by a load
//! that was killed (`kill -9`: no destructor runs) is removed by the next
//! `load -` ([`remove_stale`]).

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

/// Removes the copies in `tmp` whose loader is gone (no `/proc/PID`): a
/// load killed before its destructors ran. A pid taken again by another
/// process keeps its copy until that one ends (never a live load's copy).
/// Best effort: what cannot be read or removed is left.
pub fn remove_stale(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Copies standard input to a file, when `files` names it (`-`, once),
/// and returns `files` with the copy's path in its place.
///
/// # Errors
/// `-` given twice, standard input a terminal or empty, or the copy
/// failed (the temporary directory's path in the message).
pub fn spool_stdin(files: &[PathBuf]) -> Result<(Vec<PathBuf>, Option<Spooled>)> {
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
    let spooled = Spooled { dir };
    let path = spooled.path();
    let mut out = std::fs::File::create(&path).map_err(file_err(&path))?;
    let copied = std::io::copy(&mut std::io::stdin().lock(), &mut out).map_err(file_err(&path))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_of_gone_loaders_are_removed_and_live_ones_kept() {
        let tmp = std::env::temp_dir().join(format!("fh-stale-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        // pid_max is at most 2^22: this pid has no process.
        let gone = tmp.join(format!("{PREFIX}{}-1", 1u32 << 30));
        let mine = tmp.join(format!("{PREFIX}{}-2", std::process::id()));
        let init = tmp.join(format!("{PREFIX}1-3"));
        let other = tmp.join("flamehouse-stdin-x-4");
        for d in [&gone, &mine, &init, &other] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("stdin"), "x").unwrap();
        }
        remove_stale(&tmp);
        assert!(!gone.exists());
        for kept in [&mine, &init, &other] {
            assert!(kept.join("stdin").exists(), "{}", kept.display());
        }
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
