//! One writer per directory: an exclusive advisory lock on `LOCK`, which holds the holder's
//! pid so that a second process can say who has it. The lock goes with the process (the
//! operating system releases it when the file closes, even on SIGKILL); the pid left behind
//! by a dead holder is only a hint and is overwritten by the next holder.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

use super::OpenError;
use crate::store::{At, IoAt, IoOp};

/// The held lock; dropping it releases it.
#[derive(Debug)]
pub(super) struct DirLock {
    _file: File,
}

/// Takes the directory's lock, or says who holds it.
pub(super) fn lock(dir: &Path) -> Result<DirLock, OpenError> {
    let path = dir.join("LOCK");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .at(IoOp::Open, &path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            // Only digits: a pid, never whatever else a stray file holds.
            let pid = holder
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| holder.parse().ok())
                .flatten();
            return Err(OpenError::Locked {
                dir: dir.to_owned(),
                pid,
            });
        }
        Err(TryLockError::Error(e)) => return Err(IoAt::new(IoOp::Lock, path, &e).into()),
    }
    let pid = std::process::id().to_string();
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(pid.as_bytes()))
        .at(IoOp::Write, &path)?;
    Ok(DirLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder_and_the_first_release_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock(dir.path()).unwrap();
        let refused = lock(dir.path()).unwrap_err();
        let OpenError::Locked { dir: named, pid } = &refused else {
            panic!("{refused}")
        };
        assert_eq!(
            (named.as_path(), *pid),
            (dir.path(), Some(std::process::id()))
        );
        assert_eq!(
            refused.to_string(),
            format!(
                "the store directory {} is in use by another process (pid {}): one process \
                 may write it at a time",
                dir.path().display(),
                std::process::id()
            )
        );
        drop(held);
        lock(dir.path()).unwrap();
    }
}
