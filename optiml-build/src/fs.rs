//! `std::fs` calls whose errors name the path (cxx's `fs`), and writes that skip identical bytes so that mtimes,
//! and the rebuilds they trigger, stay quiet.

use std::io;
use std::path::{Path, PathBuf};

/// An io error with the operation and the path it concerned.
#[derive(Debug, thiserror::Error)]
#[error("failed to {op} `{}`", path.display())]
pub struct FsError {
    /// What was being done.
    pub op: &'static str,
    /// The path.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: io::Error,
}

fn err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> FsError + 'a {
    move |source| FsError {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// Reads a file.
pub fn read(path: &Path) -> Result<Vec<u8>, FsError> {
    std::fs::read(path).map_err(err("read", path))
}

/// Reads a UTF-8 file.
pub fn read_to_string(path: &Path) -> Result<String, FsError> {
    std::fs::read_to_string(path).map_err(err("read", path))
}

/// Writes a file.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), FsError> {
    std::fs::write(path, bytes).map_err(err("write", path))
}

/// Writes `bytes` unless the file already holds exactly them.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), FsError> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        create_dir_all(dir)?;
    }
    write(path, bytes)
}

/// Creates a folder and its parents.
pub fn create_dir_all(path: &Path) -> Result<(), FsError> {
    std::fs::create_dir_all(path).map_err(err("create folder", path))
}

/// Removes a folder and everything in it; a missing folder is fine.
pub fn remove_dir_all(path: &Path) -> Result<(), FsError> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(err("remove", path)(e)),
        _ => Ok(()),
    }
}

/// Renames `from` to `to`.
pub fn rename(from: &Path, to: &Path) -> Result<(), FsError> {
    std::fs::rename(from, to).map_err(err("rename into place", to))
}

/// The entries of a folder; a missing folder has none.
pub fn read_dir(path: &Path) -> Result<Vec<PathBuf>, FsError> {
    match std::fs::read_dir(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(err("list", path)(e)),
        Ok(entries) => {
            let mut out = Vec::new();
            for entry in entries {
                out.push(entry.map_err(err("list", path))?.path());
            }
            out.sort();
            Ok(out)
        }
    }
}
