//! `-` as a file to load: standard input, spooled to a file first (`perf
//! script | flamehouse load -`, `bpftrace ... | flamehouse load -`), because
//! every reader detects its format from the first bytes and some read a
//! file twice (format detection, then the reader). The copy goes to disk,
//! not memory, so input of any size keeps memory bounded; the readers'
//! own size caps apply to it as to any file.

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
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("flamehouse-stdin-{}-{nanos}", std::process::id()));
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
