//! The lock dir of the `file` guards: its default, its checks, and the guards and the control
//! feed built on it (for a scheduler and for the command-line tool).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{FileFeed, FileGuard};
use crate::clock::Clock;
use crate::guard::feed::ControlFeed;
use crate::guard::Guard;
use crate::history::RecentHistory;
use crate::options::Overlap;
use crate::private_dir::{check_private_dir, LOCK_DIR};

/// The lock dir every `file` job of a scheduler shares (or the command-line tool's).
pub(crate) struct FileStore {
    dir: PathBuf,
    /// The processes' clock, which tells the guards how old a manual run is.
    clock: Clock,
}

impl FileStore {
    /// The lock dir `dir` (`CRONGUARD_LOCK_DIR`), or the default one; checked by
    /// [`check_lock_dir`] where a job uses it.
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        FileStore {
            dir: dir.unwrap_or_else(default_lock_dir),
            clock: Clock::system(),
        }
    }

    /// The guards read `clock` (the scheduler's) where they need the time.
    pub(crate) fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The folder.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The guard of job `job`.
    pub(crate) fn guard(
        &self,
        job: &str,
        overlap: Overlap,
        grace: Duration,
        history: RecentHistory,
    ) -> Arc<dyn Guard> {
        Arc::new(
            FileGuard::new(&self.dir, job)
                .with_overlap(overlap)
                .with_misfire_grace(grace)
                .with_clock(self.clock.clone())
                .keeping_history(history),
        )
    }

    /// The control feed of this lock dir.
    pub(crate) fn feed(&self) -> Arc<dyn ControlFeed> {
        Arc::new(FileFeed::new(&self.dir))
    }

    /// The lock dir of the replicas, for the command-line tool: it must exist and, on Unix,
    /// belong to the user this process runs as, so that the files written here stay readable
    /// and writable by the replicas. The error says what is wrong and what to do.
    pub(crate) fn open_for_admin(dir: &Path) -> Result<FileStore, String> {
        let meta = std::fs::metadata(dir).map_err(|e| {
            format!(
                "{e}; give the `CRONGUARD_LOCK_DIR` of the replicas (a replica creates it when it starts)"
            )
        })?;
        if !meta.is_dir() {
            return Err(
                "it is not a folder; give the `CRONGUARD_LOCK_DIR` of the replicas".to_owned(),
            );
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let uid = nix::unistd::Uid::effective().as_raw();
            if meta.uid() != uid {
                return Err(format!(
                    "it belongs to uid {}, not to uid {uid} that this runs as; run this as the replicas' user (`sudo -u`), so that the files it writes stay theirs",
                    meta.uid()
                ));
            }
        }
        Ok(FileStore::new(Some(dir.to_owned())))
    }
}

/// The default lock dir, private to this process's user: `$XDG_RUNTIME_DIR/cronguard` when that
/// is set (and the user's), else `/run/cronguard` for root when `/run` exists, else
/// `<temp dir>/cronguard-<uid>`.
#[cfg(unix)]
pub(crate) fn default_lock_dir() -> PathBuf {
    let uid = nix::unistd::Uid::effective().as_raw();
    default_lock_dir_for(
        runtime_dir(std::env::var_os("XDG_RUNTIME_DIR"), uid).as_deref(),
        uid,
        Path::new("/run").is_dir(),
        &std::env::temp_dir(),
    )
}

#[cfg(not(unix))]
pub(crate) fn default_lock_dir() -> PathBuf {
    std::env::temp_dir().join("cronguard")
}

/// `$XDG_RUNTIME_DIR` when it is an absolute path to a folder of user `uid` (a variable kept by
/// `sudo -E` names another user's folder, and that user could replace what is made in it).
#[cfg(unix)]
fn runtime_dir(value: Option<std::ffi::OsString>, uid: u32) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dir = PathBuf::from(value?);
    let meta = std::fs::metadata(&dir).ok()?;
    (dir.is_absolute() && meta.is_dir() && meta.uid() == uid).then_some(dir)
}

#[cfg(unix)]
fn default_lock_dir_for(
    runtime_dir: Option<&Path>,
    uid: u32,
    run_exists: bool,
    temp_dir: &Path,
) -> PathBuf {
    match runtime_dir {
        Some(dir) => dir.join("cronguard"),
        None if uid == 0 && run_exists => PathBuf::from("/run/cronguard"),
        None => temp_dir.join(format!("cronguard-{uid}")),
    }
}

/// Whether `dir` can be the lock dir: a folder private to this user (made if missing).
pub(crate) fn check_lock_dir(dir: &Path) -> Result<(), String> {
    check_private_dir(dir, LOCK_DIR)
}

#[cfg(all(test, unix))]
mod lock_dir_tests {
    use super::*;

    #[test]
    fn the_default_lock_dir_is_private_to_the_user() {
        let tmp = Path::new("/tmp");
        let xdg = Path::new("/run/user/1000");
        assert_eq!(
            default_lock_dir_for(Some(xdg), 1000, true, tmp),
            Path::new("/run/user/1000/cronguard")
        );
        assert_eq!(
            default_lock_dir_for(Some(xdg), 0, true, tmp),
            Path::new("/run/user/1000/cronguard"),
            "the runtime dir comes first, for root too"
        );
        assert_eq!(
            default_lock_dir_for(None, 0, true, tmp),
            Path::new("/run/cronguard")
        );
        assert_eq!(
            default_lock_dir_for(None, 0, false, tmp),
            Path::new("/tmp/cronguard-0")
        );
        assert_eq!(
            default_lock_dir_for(None, 1000, true, tmp),
            Path::new("/tmp/cronguard-1000"),
            "/run is for root only"
        );
    }

    #[test]
    fn only_the_users_own_runtime_dir_is_used() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("cronguard-xdg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let uid = std::fs::metadata(&dir).expect("meta").uid();
        assert_eq!(
            runtime_dir(Some(dir.clone().into()), uid),
            Some(dir.clone())
        );
        assert_eq!(
            runtime_dir(Some(dir.clone().into()), uid + 1),
            None,
            "another user's"
        );
        assert_eq!(runtime_dir(Some("relative/dir".into()), uid), None);
        assert_eq!(runtime_dir(Some(dir.join("missing").into()), uid), None);
        assert_eq!(runtime_dir(None, uid), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
