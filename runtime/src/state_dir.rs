//! The state dir (`CRONGUARD_STATE_DIR`, [`Builder::state_dir`](crate::Builder::state_dir)):
//! where `local` jobs keep their fate point across restarts, as systemd timers with
//! `Persistent=true` keep theirs (docs/guide/downtime.md).
//!
//! One file per job, `<job>.fate`, holds the newest fire that started or was reported, in Unix
//! milliseconds. It is written before the fire's run starts, by a rename over the old file, so
//! that a process killed at any moment finds a whole record when it starts again and never
//! runs that fire twice. The folder belongs to one process at a time: `owner.lock` is held with
//! an exclusive `flock` while the scheduler runs.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use fs2::FileExt;

use crate::clock::epoch_millis;
use crate::guard::file::file_stem;
use crate::private_dir::{check_private_dir, STATE_DIR};

/// The state dir of this process.
#[derive(Debug)]
pub(crate) struct StateDir {
    dir: PathBuf,
    /// Held for the life of the scheduler: a second process with the same folder is a start
    /// error, not two processes overwriting each other's records.
    _owner: File,
}

impl StateDir {
    /// Creates the folder if missing, checks it as the lock dir is checked, and takes it.
    pub(crate) fn open(dir: &Path) -> Result<StateDir, String> {
        check_private_dir(dir, STATE_DIR)?;
        let owner_path = dir.join("owner.lock");
        let owner = open_private(&owner_path, false).map_err(|e| {
            format!(
                "the state dir `{}` cannot be used: {e}; set `CRONGUARD_STATE_DIR` (or `Builder::state_dir`) to a folder this process can write",
                dir.display()
            )
        })?;
        owner.try_lock_exclusive().map_err(|_| {
            format!(
                "the state dir `{}` is used by another running process; give each process a state dir of its own (`CRONGUARD_STATE_DIR` or `Builder::state_dir`)",
                dir.display()
            )
        })?;
        Ok(StateDir {
            dir: dir.to_path_buf(),
            _owner: owner,
        })
    }

    fn path(&self, job: &str) -> PathBuf {
        self.dir.join(format!("{}.fate", file_stem(job)))
    }

    /// The job's fate point; `None` when it has no record (it never ran with this state dir).
    pub(crate) fn point(&self, job: &str) -> std::io::Result<Option<DateTime<Utc>>> {
        let path = self.path(job);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let ms: i64 = text.trim().parse().map_err(|_| {
            std::io::Error::other(format!(
                "`{}` holds no fire time (`{}`); delete it to start the job's record anew",
                path.display(),
                text.trim()
            ))
        })?;
        Ok(DateTime::<Utc>::from_timestamp_millis(ms))
    }

    /// Moves the job's fate point to `fire` unless it lies there or later already; answers the
    /// point as it was.
    pub(crate) fn advance(
        &self,
        job: &str,
        fire: DateTime<Utc>,
    ) -> std::io::Result<Option<DateTime<Utc>>> {
        let before = self.point(job)?;
        if before.is_some_and(|p| p >= fire) {
            return Ok(before);
        }
        let path = self.path(job);
        let mut tmp = path.clone().into_os_string();
        tmp.push(".new");
        let tmp = PathBuf::from(tmp);
        let mut file = open_private(&tmp, true)?;
        file.write_all(format!("{}\n", epoch_millis(fire)).as_bytes())?;
        drop(file);
        std::fs::rename(&tmp, &path)?;
        Ok(before)
    }
}

/// Opens (creating, mode 0600) a file of the state dir, never following a link planted there.
fn open_private(path: &Path, truncate: bool) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).write(true).truncate(truncate);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(nix::libc::O_NOFOLLOW);
    }
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_767_225_600 + s, 0).expect("in range")
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("cronguard-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_point_moves_only_forward_and_survives_a_reopen() {
        let dir = scratch("forward");
        {
            let state = StateDir::open(&dir).expect("opens");
            assert_eq!(state.point("a/b").expect("reads"), None);
            assert_eq!(state.advance("a/b", t(10)).expect("writes"), None);
            assert_eq!(state.advance("a/b", t(5)).expect("writes"), Some(t(10)));
            assert_eq!(state.point("a/b").expect("reads"), Some(t(10)));
            assert_eq!(state.point("other").expect("reads"), None);
        }
        let again = StateDir::open(&dir).expect("opens again once let go");
        assert_eq!(again.point("a/b").expect("reads"), Some(t(10)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_state_dir_belongs_to_one_process_at_a_time() {
        let dir = scratch("owner");
        let _first = StateDir::open(&dir).expect("opens");
        let second = StateDir::open(&dir).expect_err("taken");
        assert!(
            second.contains("used by another running process"),
            "{second}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_broken_record_says_how_to_mend_it() {
        let dir = scratch("broken");
        let state = StateDir::open(&dir).expect("opens");
        std::fs::write(state.path("job"), "yesterday").expect("writes");
        let e = state.point("job").expect_err("not a time");
        assert!(e.to_string().contains("delete it"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
