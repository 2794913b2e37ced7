//! One writer per directory: an exclusive advisory lock on `LOCK`, which holds the holder's
//! pid so that a second process can say who has it. The lock goes with the process (the
//! operating system releases it when the file closes, even on SIGKILL); the pid left behind
//! by a dead holder is only a hint and is overwritten by the next holder.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// The held lock; dropping it releases it.
#[derive(Debug)]
pub(super) struct DirLock {
    _file: File,
}

/// Takes the directory's lock, or says who holds it.
pub(super) fn lock(dir: &Path) -> Result<DirLock, String> {
    let path = dir.join("LOCK");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let who = if holder.is_empty() || !holder.bytes().all(|b| b.is_ascii_digit()) {
                "another process".to_owned()
            } else {
                format!("another process (pid {holder})")
            };
            return Err(format!(
                "the store directory {} is in use by {who}: one process may write it at a time",
                dir.display()
            ));
        }
        Err(TryLockError::Error(e)) => {
            return Err(format!("cannot lock {}: {e}", path.display()));
        }
    }
    let pid = std::process::id().to_string();
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(pid.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(DirLock { _file: file })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder_and_the_first_release_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock(dir.path()).unwrap();
        let refused = lock(dir.path()).unwrap_err();
        assert!(
            refused.contains(&format!("(pid {})", std::process::id())),
            "{refused}"
        );
        drop(held);
        lock(dir.path()).unwrap();
    }
}
