//! Folders of cronguard's own that must be private to this process's user: the lock dir of the
//! `file` guards and the state dir of `local` jobs. Created if missing (mode 0700, never through
//! a link), refused when another user could plant or replace their files.

use std::path::{Path, PathBuf};

/// A folder of cronguard's own that must be private to this user: the lock dir, the state dir.
#[derive(Clone, Copy)]
pub(crate) struct PrivateDir {
    /// How messages name it (`lock dir`).
    what: &'static str,
    /// The setting that chooses it: `CRONGUARD_LOCK_DIR` (or `Builder::lock_dir`).
    setting: &'static str,
}

pub(crate) const LOCK_DIR: PrivateDir = PrivateDir {
    what: "lock dir",
    setting: "`CRONGUARD_LOCK_DIR` (or `Builder::lock_dir`)",
};

pub(crate) const STATE_DIR: PrivateDir = PrivateDir {
    what: "state dir",
    setting: "`CRONGUARD_STATE_DIR` (or `Builder::state_dir`)",
};

/// Creates `dir` if missing and checks that it is private to this user and writable.
pub(crate) fn check_private_dir(dir: &Path, kind: PrivateDir) -> Result<(), String> {
    let PrivateDir { what, setting } = kind;
    let fix = format!("set {setting} to a folder this process can write");
    create_lock_dir(dir).map_err(|e| {
        format!(
            "the {what} `{}` cannot be created: {e}; {fix}",
            dir.display()
        )
    })?;
    #[cfg(unix)]
    check_private(dir, kind)?;
    let probe = dir.join(".cronguard-probe");
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(nix::libc::O_NOFOLLOW);
    }
    options
        .open(&probe)
        .map_err(|e| format!("the {what} `{}` is not writable: {e}; {fix}", dir.display()))?;
    Ok(())
}

/// Creates the lock dir and the folders above it that are missing, each with mode 0700 by
/// `mkdir`, which never follows a link. A folder on the way that is a symbolic link of another
/// user (not root) is refused: in a world-writable folder such as `/tmp`, another user can plant
/// one where a folder of the path is about to be made.
#[cfg(unix)]
fn create_lock_dir(dir: &Path) -> std::io::Result<()> {
    use std::io::ErrorKind;
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = nix::unistd::Uid::effective().as_raw();
    let components: Vec<_> = dir.components().collect();
    let mut path = PathBuf::new();
    for (i, component) in components.iter().enumerate() {
        path.push(component);
        if let Err(e) = std::fs::symlink_metadata(&path) {
            if e.kind() != ErrorKind::NotFound {
                return Err(e);
            }
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {}
                // Made meanwhile by someone else: checked below like any existing folder.
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        // The lock dir itself is checked by `check_private`, with its own messages.
        if i + 1 == components.len() {
            break;
        }
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() && meta.uid() != 0 && meta.uid() != uid {
            return Err(std::io::Error::other(format!(
                "`{}` is a symbolic link of uid {}, another user, who could point it anywhere",
                path.display(),
                meta.uid()
            )));
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn create_lock_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Refuses a lock dir that another local user could tamper with: a symbolic link, a folder of
/// another user, or one that its group or others may write to.
#[cfg(unix)]
fn check_private(dir: &Path, kind: PrivateDir) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let PrivateDir { what, setting } = kind;
    let uid = nix::unistd::Uid::effective().as_raw();
    let shown = dir.display();
    let elsewhere = format!(
        "or set {setting} to a folder of this user that nobody else can write, such as \
         `$XDG_RUNTIME_DIR/cronguard`"
    );
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("the {what} `{shown}` cannot be read: {e}; {elsewhere}"))?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(dir)
            .map(|t| format!(" (to `{}`)", t.display()))
            .unwrap_or_default();
        return Err(format!(
            "the {what} `{shown}` is a symbolic link{target}, which cronguard does not follow \
             (whoever can change the link could point it anywhere); set {setting} to the real \
             folder"
        ));
    }
    if !meta.is_dir() {
        return Err(format!(
            "the {what} `{shown}` is not a folder; set {setting} to a folder this process can \
             write"
        ));
    }
    if meta.uid() != uid {
        return Err(format!(
            "the {what} `{shown}` belongs to uid {}, not to uid {uid} that this process runs \
             as, and its owner could plant or replace its files: run `chown {uid} '{shown}'`, \
             {elsewhere}",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o7777;
    let writers = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (true, true) => "its group and by every user",
        (true, false) => "its group",
        (false, true) => "every user",
        (false, false) => return Ok(()),
    };
    Err(format!(
        "the {what} `{shown}` is writable by {writers} (mode {mode:04o}), who could plant \
         links or forge its records: run `chmod go-w '{shown}'`, {elsewhere}"
    ))
}
