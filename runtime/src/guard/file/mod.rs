//! `lock = "file"`: an exclusive `flock` per job, shared by every process of one host.
//!
//! Two files per job in the lock dir:
//!
//! - `<job>.lock`, the run lock: held (`flock`, exclusive, non-blocking try) for the whole run.
//!   The kernel releases it when the process dies, however it dies.
//! - `<job>.state`, the claim record: the last claimed fire, the last fencing token, the last
//!   eight dropped fires reported (so that a drop is reported at warn level once), the newest fire
//!   reported missed (see below) and the holder of the run lock (its pid, its start time and the
//!   device and inode of the lock file it locked). It is read and written only under its own
//!   exclusive `flock`, held for the few microseconds of a claim. A call waits for that lock
//!   for [`STATE_LOCK_WAIT`] at most and then answers a [`GuardErrorKind::Timeout`] that names
//!   the file: a holder stuck on it makes the job's claims fail (and its fires, once their grace
//!   runs out, be reported as misfired) instead of hanging them and the blocking pool.
//!
//! Both are opened with `O_NOFOLLOW` and created with mode 0600 (the lock dir itself is checked
//! at start: see `config::check_lock_dir`), so a link planted in their place is an error, never
//! followed. A job name too long for a file name is shortened with a hash (see [`file_stem`]).
//!
//! A claim takes the state lock, answers `ClaimedByAnother` when another guard value claimed `T`
//! and `AlreadyRan` when the recorded fire is `> T` (or `Superseded`, see below),
//! `DroppedByAnother` when another guard value reported `T` as dropped or when nobody claimed `T`
//! and it lies up to the newest fire reported missed, otherwise tries the run lock (`Busy` when
//! another process holds it) and records `T` before it lets the state lock go.
//! Because the record is written under the state lock before anyone else can read it, a process
//! whose timer wakes a few milliseconds late sees `ClaimedByAnother`, never a free lock.
//! The run lock is a separate file because it is held for the whole run, while other processes
//! must still read the record to tell "this fire already ran" from "an older fire is running".
//!
//! The fate point of a job is the newest of the last claimed fire, the newest reported dropped
//! fire and the newest fire reported missed. `report_missed` reads it and, when it lies before
//! the last missed fire, records that fire, in one step under the state lock: of processes
//! starting together after a downtime, one reports each missed fire. A fire up to it that nobody
//! claimed is then answered `DroppedByAnother`, and `first_report` of it `false`.
//!
//! A `flock` belongs to an inode, not to a path. When a tmp cleaner removes `<job>.lock`, or a
//! deploy step puts a new file in its place, while a run holds it, the next claim would create
//! and lock a new inode at the same path and start a second run. Two checks close that:
//!
//! - after locking either file, a claim checks that the path still names the inode it locked
//!   (`fstat` of the descriptor against `lstat` of the path) and opens it again if not;
//! - a claim that locked the run lock but finds in the record a holder that is still alive and
//!   holds *another* inode answers `Busy`: the holder's file was removed or replaced. A holder
//!   that died (or, in this process, let its lease go) is ignored, and so is a record naming the
//!   inode the claim just locked (its holder can no longer hold it). The holder clears its record
//!   when it releases, and logs a warning when its file is gone by then.

use std::collections::VecDeque;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use fs2::FileExt;

mod controls;
mod feed;
mod history;
mod store;

pub(crate) use feed::FileFeed;
pub(crate) use store::{check_lock_dir, FileStore};

use super::{
    Claim, DropReport, Guard, GuardControls, GuardError, GuardErrorKind, GuardHistory, Lease,
};
use crate::clock::{epoch_millis, system_micros, Clock};
use crate::control::{ManualRun, Pause};
use crate::registry::BoxFuture;

/// How many times a claim opens a lock file again when its path no longer names the inode it
/// locked (the file was removed or replaced between the open and the lock).
const REOPEN_TRIES: usize = 8;

/// How long a call waits for the lock of `<job>.state`, which a claim holds for microseconds:
/// only a stuck holder (a frozen process, a `flock` someone runs on the file) keeps it longer.
/// Then the call answers a [`GuardErrorKind::Timeout`] and its blocking thread is free again;
/// the scheduler retries a claim until the misfire grace (60 s by default) runs out and then
/// reports the fire as misfired. Under the 2 s that the scheduler and health checks wait for a
/// guard, so that they report this error rather than no answer.
const STATE_LOCK_WAIT: Duration = Duration::from_secs(1);

/// The longest pause between two tries of the state lock while waiting for it.
const STATE_LOCK_PAUSE: Duration = Duration::from_millis(20);

#[derive(Clone)]
pub(crate) struct FileGuard {
    lock_path: PathBuf,
    state_path: PathBuf,
    /// `overlap = "skip"`: a busy fire is dropped, so the claim records its report. Under
    /// `queue` and `replace` a busy fire waits, and its misfire, if it comes to that, is reported
    /// through `first_report`.
    skip: bool,
    /// The fires this guard value reported last: asking again for one of them answers `true`
    /// (the record keeps the last [`REPORTS_KEPT`] reported fires of every process).
    reported_here: Arc<Mutex<VecDeque<i64>>>,
    /// Random, made once per guard value: recorded with each claim, so that a claim repeated by
    /// this guard value is recognised as its own (never answered `AlreadyRan`).
    nonce: u64,
    /// A manual run asked for longer ago than this is refused.
    misfire_grace: Duration,
    /// The clock of the processes sharing the lock dir (the host's, unless a scheduler was given
    /// another): the guard has none of its own.
    clock: Clock,
    /// The job's name, as the history gives it.
    job: Arc<str>,
    /// How much of the job's history to keep (`<job>.history`).
    history_kept: crate::history::RecentHistory,
}

/// How many of its own reported fires a guard value remembers.
const REPORTED_HERE: usize = 16;

/// The run lock, held, and the inode it is on.
struct RunLock {
    file: Locked,
    id: FileId,
}

/// A file this process holds an exclusive `flock` on; dropping it unlocks the file before closing
/// it. Closing alone is not enough: a child process the application forks meanwhile shares the
/// open file until it runs its program, and would keep the lock held for that long after this
/// process let it go (a claim in that moment would be answered busy).
struct Locked(File);

impl std::ops::Deref for Locked {
    type Target = File;

    fn deref(&self) -> &File {
        &self.0
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        let _ = FileExt::unlock(&self.0);
    }
}

impl FileGuard {
    pub(crate) fn new(dir: &Path, job: &str) -> Self {
        let stem = file_stem(job);
        FileGuard {
            lock_path: dir.join(format!("{stem}.lock")),
            state_path: dir.join(format!("{stem}.state")),
            skip: true,
            reported_here: Arc::default(),
            nonce: fastrand::u64(1..),
            misfire_grace: crate::DEFAULT_MISFIRE_GRACE,
            clock: Clock::system(),
            job: Arc::from(job),
            history_kept: crate::history::RecentHistory::default(),
        }
    }

    /// How much of the job's history to keep.
    pub(crate) fn keeping_history(mut self, kept: crate::history::RecentHistory) -> Self {
        self.history_kept = kept;
        self
    }

    /// The clock that tells how old a manual run is: the scheduler's.
    pub(crate) fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The job's misfire grace, which bounds how late a manual run may still be claimed.
    pub(crate) fn with_misfire_grace(mut self, grace: Duration) -> Self {
        self.misfire_grace = grace;
        self
    }

    /// Whether a busy claim records the fire as reported (`overlap = "skip"`, the default).
    pub(crate) fn with_overlap(mut self, overlap: crate::options::Overlap) -> Self {
        self.skip = overlap == crate::options::Overlap::Skip;
        self
    }

    /// Whether this guard value reported `fire` (one of its last [`REPORTED_HERE`]).
    fn reported_by_self(&self, fire: i64) -> bool {
        self.reported_here
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&fire)
    }

    /// Whether this guard value reports `fire` first, remembering it if so.
    fn report_first(&self, record: &mut Record, fire: i64) -> DropReport {
        let mut here = self
            .reported_here
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if here.contains(&fire) {
            return DropReport::First;
        }
        // The record names the claimant of the last claimed fire only.
        if record.last_fire == fire && record.claimant != 0 && record.claimant != self.nonce {
            return DropReport::ClaimedElsewhere;
        }
        if record.reported.contains(&fire) || record.missed(fire) {
            return DropReport::ReportedElsewhere;
        }
        record.add_report(fire);
        if here.len() == REPORTED_HERE {
            here.pop_front();
        }
        here.push_back(fire);
        DropReport::First
    }

    fn claim_blocking(&self, fire: i64) -> Result<Claim, GuardError> {
        // The state lock is released when `state_file` is dropped at the end of this function.
        let state_file = self.lock_state()?;
        let mut record = Record::read(&state_file).map_err(|e| self.state_err(e))?;
        if record.last_fire == fire && record.claimant == self.nonce {
            // This guard value's own claim, repeated: its lease was dropped with the answer, and
            // a dropped lease lets its lock go at once, so the fire can no longer start.
            return Ok(Claim::Lapsed);
        }
        if record.last_fire == fire && record.claimant != 0 {
            return Ok(Claim::ClaimedByAnother);
        }
        if record.missed(fire) && !self.reported_by_self(fire) {
            // Nobody claimed it and a process reported it missed: that decides it. This guard
            // value's own report of it as dropped (a busy answer it never got) decided it first.
            return Ok(Claim::DroppedByAnother);
        }
        if record.last_fire >= fire {
            if record.first_fire != 0 && fire < record.first_fire {
                // Older than every claim: nobody claimed it, a later fire was (a process that
                // started after it, while the one that holds it was paused).
                return Ok(Claim::Superseded);
            }
            return Ok(Claim::AlreadyRan);
        }
        if let Some(pause) = self.paused_locked()? {
            return self.paused_claim(&state_file, &mut record, fire, pause);
        }
        if record.reported.contains(&fire) && !self.reported_by_self(fire) {
            // Another process dropped this fire and reported it: that decides it.
            return Ok(Claim::DroppedByAnother);
        }
        let Some(run) = self.try_lock_run()? else {
            return self.busy(&state_file, &mut record, fire);
        };
        if let Some(holder) = record.holder {
            if holder.file != run.id && holder.is_alive() {
                tracing::warn!(
                    lock_file = %self.lock_path.display(),
                    holder_pid = holder.pid,
                    "the lock file was removed or replaced while process {} still runs the job: \
                     the fire is busy; keep tmp cleaners and deploy steps away from the lock dir",
                    holder.pid
                );
                drop(run);
                return self.busy(&state_file, &mut record, fire);
            }
        }
        let holder = Holder::this_process(run.id);
        if record.last_fire == 0 {
            // The job's first claim (a record of an earlier version keeps 0: not known).
            record.first_fire = fire;
        }
        record.last_fire = fire;
        // This guard value's own report of the fire gives way: it reports the fire if it gives
        // it up.
        record.forget_report(fire);
        // Never below the clock in microseconds, so a lost state file cannot send tokens back.
        record.token = (record.token + 1).max(system_micros());
        record.holder = Some(holder);
        record.claimant = self.nonce;
        record.write(&state_file).map_err(|e| self.state_err(e))?;
        held_here::add(run.id);
        Ok(Claim::Acquired(Box::new(FileLease {
            held: Some(Held {
                run_file: run.file,
                holder,
                guard: self.clone(),
            }),
            token: record.token,
        })))
    }

    /// Answers `Busy`, recording the fire as reported when it is the first report.
    fn busy(&self, state_file: &File, record: &mut Record, fire: i64) -> Result<Claim, GuardError> {
        if !self.skip {
            return Ok(Claim::Busy {
                first_report: false,
            });
        }
        let before = record.reported;
        let first_report = self.report_first(record, fire) == DropReport::First;
        if record.reported != before {
            record.write(state_file).map_err(|e| self.state_err(e))?;
        }
        Ok(Claim::Busy { first_report })
    }

    /// Opens and locks `<job>.state` (waiting for the lock up to [`STATE_LOCK_WAIT`]), making
    /// sure the path still names the locked inode.
    fn lock_state(&self) -> Result<Locked, GuardError> {
        self.lock_state_with(true)?
            .ok_or_else(|| self.state_err(std::io::Error::from(std::io::ErrorKind::WouldBlock)))
    }

    /// [`Self::lock_state`]; without `wait`, `None` when another claim holds the state lock.
    fn lock_state_with(&self, wait: bool) -> Result<Option<Locked>, GuardError> {
        let deadline = Instant::now() + STATE_LOCK_WAIT;
        for _ in 0..REOPEN_TRIES {
            let file = open(&self.state_path)?;
            // Never `lock_exclusive`: a blocking `flock` cannot be given up, so a stuck holder
            // would keep this thread of the blocking pool for good.
            let mut pause = Duration::from_millis(1);
            loop {
                match file.try_lock_exclusive() {
                    Ok(()) => break,
                    Err(e) if is_contended(&e) => {}
                    Err(e) => return Err(self.state_err(e)),
                }
                if !wait {
                    return Ok(None);
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(self.state_lock_timeout());
                }
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(STATE_LOCK_PAUSE);
            }
            let file = Locked(file);
            if still_at(&file, &self.state_path)
                .map_err(|e| self.state_err(e))?
                .is_some()
            {
                return Ok(Some(file));
            }
        }
        Err(self.state_err(kept_replaced()))
    }

    /// Opens and tries to lock `<job>.lock`: `None` when another holder has it.
    fn try_lock_run(&self) -> Result<Option<RunLock>, GuardError> {
        for _ in 0..REOPEN_TRIES {
            let file = open(&self.lock_path)?;
            match file.try_lock_exclusive() {
                Ok(()) => {}
                Err(e) if is_contended(&e) => return Ok(None),
                Err(e) => return Err(self.lock_err(e)),
            }
            let file = Locked(file);
            if let Some(id) = still_at(&file, &self.lock_path).map_err(|e| self.lock_err(e))? {
                return Ok(Some(RunLock { file, id }));
            }
        }
        Err(self.lock_err(kept_replaced()))
    }

    /// Runs `f` on the record under the state lock; writes the record back when `f` says so.
    fn with_record<T>(&self, f: impl FnOnce(&mut Record) -> (T, bool)) -> Result<T, GuardError> {
        let state_file = self.lock_state()?;
        self.update(&state_file, f)
    }

    fn update<T>(
        &self,
        state_file: &File,
        f: impl FnOnce(&mut Record) -> (T, bool),
    ) -> Result<T, GuardError> {
        let mut record = Record::read(state_file).map_err(|e| self.state_err(e))?;
        let (answer, changed) = f(&mut record);
        if changed {
            record.write(state_file).map_err(|e| self.state_err(e))?;
        }
        Ok(answer)
    }

    fn state_err(&self, source: std::io::Error) -> GuardError {
        file_error(&self.state_path, source)
    }

    /// The state lock stayed taken for all of [`STATE_LOCK_WAIT`].
    fn state_lock_timeout(&self) -> GuardError {
        let path = self.state_path.display();
        GuardError::new(
            GuardErrorKind::Timeout,
            format!(
                "the lock of `{path}` stayed taken for {} ms, where a claim holds it for \
                 microseconds: a process holding `{path}` is stuck (frozen, or a `flock` run on \
                 it); find it with `fuser {path}` or `lsof {path}`",
                STATE_LOCK_WAIT.as_millis()
            ),
        )
    }

    fn lock_err(&self, source: std::io::Error) -> GuardError {
        file_error(&self.lock_path, source)
    }
}

fn kept_replaced() -> std::io::Error {
    std::io::Error::other(format!(
        "the file was removed or replaced each time it was locked ({REOPEN_TRIES} times); \
         something keeps deleting files in the lock dir"
    ))
}

impl FileGuard {
    /// Runs a blocking operation on the blocking pool.
    fn blocking<T: Send + 'static>(
        &self,
        op: impl FnOnce(&FileGuard) -> Result<T, GuardError> + Send + 'static,
    ) -> BoxFuture<Result<T, GuardError>> {
        let guard = self.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || op(&guard))
                .await
                .map_err(blocking_failed)?
        })
    }
}

impl Guard for FileGuard {
    fn claim(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
        let fire = epoch_millis(fire_time);
        self.blocking(move |g| g.claim_blocking(fire))
    }

    fn report_drop(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<DropReport, GuardError>> {
        let fire = epoch_millis(fire_time);
        self.blocking(move |g| {
            g.with_record(|r| {
                let before = r.reported;
                let first = g.report_first(r, fire);
                (first, r.reported != before)
            })
        })
    }

    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        self.blocking(|g| {
            let last = g.with_record(|r| (r.last_fire, false))?;
            Ok((last > 0)
                .then(|| DateTime::<Utc>::from_timestamp_millis(last))
                .flatten())
        })
    }

    fn fate_point(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        self.blocking(|g| {
            let point = g.with_record(|r| (r.fate_point(), false))?;
            Ok(point.and_then(DateTime::<Utc>::from_timestamp_millis))
        })
    }

    fn report_missed(
        &self,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
    ) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let (first, last) = (epoch_millis(first), epoch_millis(last));
        self.blocking(move |g| {
            let point = g.with_record(|r| r.report_missed(first, last))?;
            Ok(point.and_then(DateTime::<Utc>::from_timestamp_millis))
        })
    }

    fn controls(&self) -> Option<&dyn GuardControls> {
        Some(self)
    }

    fn history(&self) -> Option<&dyn GuardHistory> {
        (self.history_kept.kept > 0).then_some(self as &dyn GuardHistory)
    }
}

impl GuardHistory for FileGuard {
    fn record(&self, entry: crate::history::HistoryEntry) -> BoxFuture<Result<(), GuardError>> {
        self.blocking(move |g| g.record_history_blocking(&entry))
    }

    fn read(
        &self,
        since: DateTime<Utc>,
    ) -> BoxFuture<Result<Vec<crate::history::HistoryEntry>, GuardError>> {
        self.blocking(move |g| g.read_history_blocking(&g.job, since))
    }
}

impl GuardControls for FileGuard {
    fn set_pause(&self, pause: Option<Pause>) -> BoxFuture<Result<(), GuardError>> {
        self.blocking(move |g| g.set_pause_blocking(pause))
    }

    fn pause(&self) -> BoxFuture<Result<Option<Pause>, GuardError>> {
        self.blocking(FileGuard::pause_blocking)
    }

    fn claim_manual(&self, run: ManualRun) -> BoxFuture<Result<Claim, GuardError>> {
        self.blocking(move |g| g.claim_manual_blocking(run))
    }
}

struct FileLease {
    /// `None` once released.
    held: Option<Held>,
    token: u64,
}

/// What a lease holds until it is released.
struct Held {
    run_file: Locked,
    holder: Holder,
    guard: FileGuard,
}

impl Held {
    /// Frees the run lock (without waiting for anything) and hands back what is needed to clear
    /// the record.
    fn let_go(self) -> (FileGuard, Holder) {
        let Held {
            run_file,
            holder,
            guard,
        } = self;
        if !matches!(still_at(&run_file, &guard.lock_path), Ok(Some(_))) {
            tracing::warn!(
                lock_file = %guard.lock_path.display(),
                "the lock file was removed or replaced while this run held it; the claim record \
                 kept other processes from starting the job meanwhile, but keep tmp cleaners and \
                 deploy steps away from the lock dir"
            );
        }
        drop(run_file);
        held_here::remove(holder.file);
        (guard, holder)
    }
}

/// Clears the record's holder when it is still `holder` (a later holder's record is kept).
/// Without `wait`, `None` when the state lock is taken (a claim is in its critical section).
fn clear_holder(guard: &FileGuard, holder: Holder, wait: bool) -> Option<Result<(), GuardError>> {
    let state_file = match guard.lock_state_with(wait) {
        Ok(Some(file)) => file,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    Some(guard.update(&state_file, |r| {
        let mine = r.holder == Some(holder);
        if mine {
            r.holder = None;
        }
        ((), mine)
    }))
}

impl Lease for FileLease {
    fn fencing_token(&self) -> u64 {
        self.token
    }

    /// Frees the run lock at once. The record's holder is cleared at once too when the state lock
    /// is free (it is held for microseconds), so that the release, like the `flock` alone before,
    /// is over when this is first polled; otherwise on the blocking pool.
    fn release(mut self: Box<Self>) -> BoxFuture<Result<(), GuardError>> {
        let Some(held) = self.held.take() else {
            return Box::pin(std::future::ready(Ok(())));
        };
        let (guard, holder) = held.let_go();
        if let Some(done) = clear_holder(&guard, holder, false) {
            return Box::pin(std::future::ready(done));
        }
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                clear_holder(&guard, holder, true).unwrap_or(Ok(()))
            })
            .await
            .map_err(blocking_failed)?
        })
    }
}

impl Drop for FileLease {
    /// A lease dropped without `release` (its caller was cancelled or panicked) frees the run
    /// lock at once and clears the record like `release`.
    fn drop(&mut self) {
        let Some(held) = self.held.take() else {
            return;
        };
        let (guard, holder) = held.let_go();
        let warn = |e: GuardError| {
            tracing::warn!(error = %crate::error::Chain(&e), "could not clear the holder of a dropped file lease");
        };
        match clear_holder(&guard, holder, false) {
            Some(Ok(())) => {}
            Some(Err(e)) => warn(e),
            None => {
                let clear = move || {
                    if let Some(Err(e)) = clear_holder(&guard, holder, true) {
                        warn(e);
                    }
                };
                match tokio::runtime::Handle::try_current() {
                    Ok(rt) => drop(rt.spawn_blocking(clear)),
                    Err(_) => clear(),
                }
            }
        }
    }
}

/// The run locks this process holds, by inode: how a claim tells whether a holder recorded with
/// this process's own pid still holds its lease.
mod held_here {
    use super::{FileId, Mutex, PoisonError};

    static HELD: Mutex<Vec<FileId>> = Mutex::new(Vec::new());

    pub(super) fn add(id: FileId) {
        HELD.lock().unwrap_or_else(PoisonError::into_inner).push(id);
    }

    pub(super) fn remove(id: FileId) {
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = held.iter().position(|h| *h == id) {
            held.swap_remove(i);
        }
    }

    pub(super) fn contains(id: FileId) -> bool {
        HELD.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&id)
    }
}

/// An inode: device and inode number (both zero where the platform does not tell them).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    #[cfg(unix)]
    fn of(meta: &Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }

    #[cfg(not(unix))]
    fn of(_meta: &Metadata) -> FileId {
        FileId::default()
    }
}

/// The inode of `file` when `path` still names it; `None` when the path is gone or names another
/// file.
fn still_at(file: &File, path: &Path) -> std::io::Result<Option<FileId>> {
    let id = FileId::of(&file.metadata()?);
    match std::fs::symlink_metadata(path) {
        Ok(meta) if FileId::of(&meta) == id => Ok(Some(id)),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The holder of a run lock, as the claim record keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Holder {
    pid: u32,
    /// When the process started (Linux: clock ticks after boot, from `/proc/<pid>/stat`), so
    /// that a reused pid is not taken for the holder; 0 where unknown.
    start: u64,
    /// The lock file it locked.
    file: FileId,
}

impl Holder {
    fn this_process(file: FileId) -> Holder {
        Holder {
            pid: std::process::id(),
            start: own_start(),
            file,
        }
    }

    /// Whether the holder may still hold its lock: its process is alive (and, in this process,
    /// its lease is still held).
    fn is_alive(&self) -> bool {
        if self.pid == std::process::id() {
            return self.start == own_start() && held_here::contains(self.file);
        }
        process_alive(self.pid, self.start)
    }
}

fn own_start() -> u64 {
    static START: OnceLock<u64> = OnceLock::new();
    *START.get_or_init(|| process_start(std::process::id()).unwrap_or(0))
}

/// What `/proc/<pid>/stat` tells: whether the process is a zombie (its files, so its locks, are
/// already closed), and when it started.
#[cfg(target_os = "linux")]
fn proc_stat(pid: u32) -> Option<(bool, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces and parentheses: fields follow the last `)`.
    let mut fields = text.get(text.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?;
    // `starttime` is field 22; `state` was field 3.
    let start = fields.nth(18)?.parse().ok()?;
    Some((matches!(state, "Z" | "X" | "x"), start))
}

fn process_start(pid: u32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        proc_stat(pid).map(|(_, start)| start)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// Whether process `pid`, started at `start` (0: unknown), is alive. Where `/proc` does not tell
/// (not Linux, or `hidepid`), `kill(pid, 0)` does: a process of another user is alive too.
fn process_alive(pid: u32, start: u64) -> bool {
    // `kill` with 0 or a negative pid signals whole groups: never ask about those.
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    #[cfg(target_os = "linux")]
    if let Some((zombie, started)) = proc_stat(pid) {
        return !zombie && (start == 0 || started == start);
    }
    signal_zero(raw)
}

#[cfg(unix)]
fn signal_zero(pid: i32) -> bool {
    use nix::errno::Errno;
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) | Err(Errno::EPERM) => true,
        Err(Errno::ESRCH) => false,
        // Cannot tell: keep the run exclusive.
        Err(_) => true,
    }
}

#[cfg(not(unix))]
fn signal_zero(_pid: i32) -> bool {
    // No way to tell: a recorded holder is taken as gone, as before holders were recorded.
    false
}

/// A lock or state file that could not be opened, locked, read or written.
pub(super) fn file_error(path: &Path, source: std::io::Error) -> GuardError {
    GuardError::new(
        GuardErrorKind::Other,
        format!("cannot use the lock file `{}`", path.display()),
    )
    .with_source(source)
}

/// A blocking file operation that could not run (the runtime is shutting down).
pub(super) fn blocking_failed(e: tokio::task::JoinError) -> GuardError {
    GuardError::new(
        GuardErrorKind::Other,
        "a blocking guard operation could not run",
    )
    .with_source(e)
}

/// Opens (or creates) a lock or state file: never through a symbolic link, which another local
/// user could have planted to make this process write or lock a file of its choice, and readable
/// and writable by this user only.
fn open(path: &Path) -> Result<File, GuardError> {
    let err = |source| file_error(path, source);
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(nix::libc::O_NOFOLLOW);
    }
    let file = options.open(path).map_err(|source| {
        let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        err(if link {
            std::io::Error::new(
                source.kind(),
                "it is a symbolic link, and a lock file is never opened through one (another \
                 user may have planted it); remove it, and keep the lock dir private to this user",
            )
        } else {
            source
        })
    })?;
    if !file.metadata().map_err(err)?.is_file() {
        return Err(err(std::io::Error::other(
            "it is not a regular file; remove it, and keep the lock dir private to this user",
        )));
    }
    Ok(file)
}

fn is_contended(e: &std::io::Error) -> bool {
    e.raw_os_error() == fs2::lock_contended_error().raw_os_error()
        || e.kind() == std::io::ErrorKind::WouldBlock
}

/// The claim record: one fixed-width line, rewritten in place with a single write so that a
/// process killed at any moment leaves either the old or the new record.
#[derive(Debug, PartialEq, Eq)]
struct Record {
    last_fire: i64,
    token: u64,
    /// The last reported dropped fires, newest first; [`NO_REPORT`] where none.
    reported: [i64; REPORTS_KEPT],
    holder: Option<Holder>,
    /// The nonce of the guard value that claimed `last_fire` (0: not recorded).
    claimant: u64,
    /// The first fire ever claimed (0: not recorded, as by earlier versions): an older fire was
    /// never claimed, so a claim of it after a later one is passed over, not already run.
    first_fire: i64,
    /// The newest fire reported missed ([`Guard::report_missed`]; 0: none): a fire up to it that
    /// nobody claimed never starts and is not reported again.
    missed_through: i64,
    /// The fate point when the newest missed fires were recorded, and the newest missed fire
    /// before them (0: none): the fires between were not reported missed.
    missed_from: i64,
    missed_before: i64,
}

impl Default for Record {
    fn default() -> Self {
        Record {
            last_fire: 0,
            token: 0,
            reported: [NO_REPORT; REPORTS_KEPT],
            holder: None,
            claimant: 0,
            first_fire: 0,
            missed_through: 0,
            missed_from: 0,
            missed_before: 0,
        }
    }
}

/// How many reported dropped fires the record keeps: a drop of any of them is reported at warn
/// level once; an older one reported again is reported twice rather than never.
const REPORTS_KEPT: usize = 8;
const NO_REPORT: i64 = i64::MIN;

/// `v2`, nineteen right-aligned 20-character numbers (wide enough for any `i64`/`u64`),
/// newline: the last fire, token and newest reported fire, then the holder's pid (0: none),
/// start, device and inode, then the seven older reported fires, the claimant of the last fire,
/// the first fire ever claimed, the newest fire reported missed, the fate point before the
/// newest missed fires and the newest missed fire before those. `v1` records (the first three
/// only) and `v2` records without the fields after the inode, or without the last ones, as
/// earlier versions write them, are still read; those versions read this record too (they ignore
/// what they do not know, and a record they write back no longer holds the fields they do not
/// know).
const RECORD_LEN: usize = 2 + (11 + REPORTS_KEPT) * (1 + 20) + 1;

impl Record {
    /// Records `fire` as reported, keeping the newest [`REPORTS_KEPT`].
    fn add_report(&mut self, fire: i64) {
        let mut all = self.reported.to_vec();
        all.push(fire);
        all.sort_unstable_by(|a, b| b.cmp(a));
        all.dedup();
        all.resize(REPORTS_KEPT, NO_REPORT);
        self.reported.copy_from_slice(&all[..REPORTS_KEPT]);
    }

    /// The job's fate point ([`Guard::fate_point`]): the newest fire claimed (also one given up
    /// unstarted), reported dropped or reported missed; `None` for a new job.
    fn fate_point(&self) -> Option<i64> {
        let claimed = (self.last_fire != 0).then_some(self.last_fire);
        let reported = (self.reported[0] != NO_REPORT).then_some(self.reported[0]);
        let missed = (self.missed_through != 0).then_some(self.missed_through);
        claimed.max(reported).max(missed)
    }

    /// Records the fires from `first` to `last` as missed unless the fate point already reaches
    /// `last`; answers the fate point as it was before, and whether the record changed.
    fn report_missed(&mut self, first: i64, last: i64) -> (Option<i64>, bool) {
        let point = self.fate_point();
        let moved = point.is_none_or(|p| p < last);
        if moved {
            // The fires recorded are those after the fate point from `first` on: a fire before
            // `first` still open in a process is that process's to decide. A report that goes
            // on from the missed fires before extends them.
            let from = point.map_or(first - 1, |p| p.max(first - 1));
            let before = (self.missed_through != 0).then_some(self.missed_through);
            if before.is_none() || point != before || Some(from) != point {
                self.missed_from = from;
                self.missed_before = self.missed_through;
            }
            self.missed_through = last;
        }
        (point, moved)
    }

    /// Whether `fire` was reported missed: it lies up to the newest fire reported missed, and
    /// nobody claimed it (it lies after the last claim, or before the first).
    fn missed(&self, fire: i64) -> bool {
        self.missed_through != 0
            && fire <= self.missed_through
            && (self.missed_from == 0
                || fire > self.missed_from
                || (self.missed_before != 0 && fire <= self.missed_before))
            && (fire > self.last_fire || (self.first_fire != 0 && fire < self.first_fire))
    }

    /// Forgets a report of `fire`: the fire was claimed after it, so its claimant reports it.
    fn forget_report(&mut self, fire: i64) {
        if self.reported.contains(&fire) {
            let mut kept: Vec<i64> = self
                .reported
                .iter()
                .copied()
                .filter(|r| *r != fire)
                .collect();
            kept.resize(REPORTS_KEPT, NO_REPORT);
            self.reported.copy_from_slice(&kept);
        }
    }

    fn read(mut file: &File) -> std::io::Result<Record> {
        let mut text = String::new();
        file.seek(SeekFrom::Start(0))?;
        file.read_to_string(&mut text)?;
        // An empty or unreadable record is a new job (or a wiped lock dir): start from zero;
        // tokens still rise because they never go below the clock.
        Ok(Record::parse(&text).unwrap_or_default())
    }

    fn parse(text: &str) -> Option<Record> {
        let text = text.trim();
        let (v2, rest) = if let Some(rest) = text.strip_prefix("v2 ") {
            (true, rest)
        } else {
            (false, text.strip_prefix("v1 ")?)
        };
        let mut fields = rest.split_whitespace();
        let mut record = Record {
            last_fire: fields.next()?.parse().ok()?,
            token: fields.next()?.parse().ok()?,
            ..Record::default()
        };
        record.reported[0] = fields.next()?.parse().ok()?;
        if v2 {
            let pid: u32 = fields.next()?.parse().ok()?;
            let start = fields.next()?.parse().ok()?;
            let dev = fields.next()?.parse().ok()?;
            let ino = fields.next()?.parse().ok()?;
            record.holder = (pid != 0).then_some(Holder {
                pid,
                start,
                file: FileId { dev, ino },
            });
            for slot in record.reported.iter_mut().skip(1) {
                match fields.next() {
                    Some(field) => *slot = field.parse().ok()?,
                    None => break,
                }
            }
            if let Some(field) = fields.next() {
                record.claimant = field.parse().ok()?;
            }
            if let Some(field) = fields.next() {
                record.first_fire = field.parse().ok()?;
            }
            if let Some(field) = fields.next() {
                record.missed_through = field.parse().ok()?;
            }
            if let Some(field) = fields.next() {
                record.missed_from = field.parse().ok()?;
            }
            if let Some(field) = fields.next() {
                record.missed_before = field.parse().ok()?;
            }
        }
        Some(record)
    }

    fn format(&self) -> String {
        let (pid, start, file) = self
            .holder
            .map_or((0, 0, FileId::default()), |h| (h.pid, h.start, h.file));
        let mut line = format!(
            "v2 {:>20} {:>20} {:>20} {:>20} {:>20} {:>20} {:>20}",
            self.last_fire, self.token, self.reported[0], pid, start, file.dev, file.ino
        );
        for older in &self.reported[1..] {
            line.push_str(&format!(" {older:>20}"));
        }
        line.push_str(&format!(
            " {:>20} {:>20} {:>20} {:>20} {:>20}\n",
            self.claimant,
            self.first_fire,
            self.missed_through,
            self.missed_from,
            self.missed_before
        ));
        line
    }

    fn write(&self, mut file: &File) -> std::io::Result<()> {
        let line = self.format();
        debug_assert_eq!(line.len(), RECORD_LEN);
        file.seek(SeekFrom::Start(0))?;
        file.write_all(line.as_bytes())?;
        file.set_len(line.len() as u64)?;
        Ok(())
    }
}

/// The longest stem a lock dir takes: a file name is at most 255 bytes on the usual file systems
/// (`NAME_MAX`), and the longer suffix is `.state`.
const MAX_STEM: usize = 255 - ".state".len();

/// A file name for a job name: `::` becomes `.`, characters other than ASCII letters, digits,
/// `_` and `-` are percent-encoded, so distinct names never share a file. A stem longer than
/// [`MAX_STEM`] keeps a readable prefix, then `~` (which the encoding never writes) and the
/// FNV-1a hash of the whole job name in 16 hex digits.
pub(crate) fn file_stem(job: &str) -> String {
    let mut out = String::with_capacity(job.len());
    let mut rest = job;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("::") {
            out.push('.');
            rest = after;
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        rest = &rest[c.len_utf8()..];
    }
    if out.len() <= MAX_STEM {
        return out;
    }
    // The stem is ASCII, so any byte is a character boundary; an escape is not cut in two.
    let mut cut = MAX_STEM - 1 - 16;
    if let Some(percent) = out[cut.saturating_sub(2)..cut].rfind('%') {
        cut = cut - 2 + percent;
    }
    format!("{}~{:016x}", &out[..cut], fnv1a64(job.as_bytes()))
}

/// 64-bit FNV-1a: stable across versions and platforms, which a file name needs (`std`'s
/// hashers are not).
fn fnv1a64(bytes: &[u8]) -> u64 {
    crate::model::limits::fnv1a64(&[bytes])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stems_are_readable_and_distinct() {
        assert_eq!(file_stem("app::jobs::settle"), "app.jobs.settle");
        assert_eq!(file_stem("a.b"), "a%2Eb");
        assert_eq!(file_stem("a:b"), "a%3Ab");
        assert_eq!(file_stem("nightly report"), "nightly%20report");
        assert_ne!(file_stem("a::b"), file_stem("a.b"));
    }

    #[test]
    fn record_round_trips_with_a_fixed_width() {
        let mut r = Record {
            last_fire: 1_767_225_600_000,
            token: 42,
            ..Record::default()
        };
        r.add_report(-1);
        assert_eq!(r.format().len(), RECORD_LEN);
        assert_eq!(Record::parse(&r.format()), Some(r));
        let mut held = Record {
            last_fire: i64::MIN,
            token: u64::MAX,
            reported: [i64::MAX, 5, 4, 3, 2, 1, 0, NO_REPORT],
            claimant: u64::MAX,
            first_fire: i64::MIN,
            missed_through: i64::MAX,
            missed_from: i64::MIN,
            missed_before: 7,
            holder: Some(Holder {
                pid: u32::MAX,
                start: u64::MAX,
                file: FileId {
                    dev: u64::MAX,
                    ino: 7,
                },
            }),
        };
        assert_eq!(held.format().len(), RECORD_LEN);
        assert_eq!(Record::parse(&held.format()), Some(held));
        held = Record::default();
        for fire in [10, 30, 20, 30] {
            held.add_report(fire);
        }
        assert_eq!(&held.reported[..4], &[30, 20, 10, NO_REPORT]);
        for fire in 100..110 {
            held.add_report(fire);
        }
        assert_eq!(held.reported[0], 109, "the newest first");
        assert_eq!(held.reported[7], 102, "the oldest fall out");
        assert_eq!(Record::parse("garbage"), None);
    }

    #[test]
    fn v1_records_are_still_read() {
        let v1 = format!("v1 {:>20} {:>20} {:>20}\n", 1_767_225_600_000_i64, 42, -1);
        assert_eq!(
            Record::parse(&v1),
            Some(Record {
                last_fire: 1_767_225_600_000,
                token: 42,
                reported: [
                    -1, NO_REPORT, NO_REPORT, NO_REPORT, NO_REPORT, NO_REPORT, NO_REPORT, NO_REPORT
                ],
                holder: None,
                claimant: 0,
                first_fire: 0,
                missed_through: 0,
                missed_from: 0,
                missed_before: 0,
            })
        );
        // A `v2` record of an earlier version: no older reports.
        let v2 = format!(
            "v2 {:>20} {:>20} {:>20} {:>20} {:>20} {:>20} {:>20}\n",
            1_767_225_600_000_i64, 42, 7, 0, 0, 0, 0
        );
        let parsed = Record::parse(&v2).expect("read");
        assert_eq!(parsed.reported[0], 7);
        assert_eq!(parsed.reported[1], NO_REPORT);
        // A `v2` record of the version before missed fires: no fire reported missed.
        let mut before = format!(
            "v2 {:>20} {:>20} {:>20} {:>20} {:>20} {:>20} {:>20}",
            1_767_225_600_000_i64, 42, 7, 0, 0, 0, 0
        );
        for older in [6, 5, 4, 3, 2, 1, 0] {
            before.push_str(&format!(" {older:>20}"));
        }
        before.push_str(&format!(" {:>20} {:>20}\n", 99, 1_767_225_000_000_i64));
        let parsed = Record::parse(&before).expect("read");
        assert_eq!(
            (parsed.claimant, parsed.first_fire),
            (99, 1_767_225_000_000)
        );
        assert_eq!(parsed.missed_through, 0, "no fire reported missed");
        assert_eq!(parsed.fate_point(), Some(1_767_225_600_000));
        // That version reads this one's record as its own: the fields it knows come first.
        let now = Record {
            missed_through: 1_767_225_900_000,
            ..parsed
        };
        let line = now.format();
        let known = format!("{}\n", &line[..before.len() - 1]);
        assert_eq!(known, before);
    }

    #[test]
    fn the_fate_point_counts_claims_reports_and_missed_fires() {
        let mut r = Record::default();
        assert_eq!(r.fate_point(), None, "a new job");
        assert_eq!(r.report_missed(10, 50), (None, true));
        assert_eq!(r.fate_point(), Some(50));
        assert!(r.missed(40) && r.missed(50) && !r.missed(51) && !r.missed(9));
        assert_eq!(r.report_missed(40, 45), (Some(50), false), "never back");
        assert_eq!(r.missed_through, 50);
        r.first_fire = 20;
        r.last_fire = 60;
        assert!(r.missed(10), "before every claim: nobody claimed it");
        assert!(!r.missed(30), "between claims: it may have been claimed");
        assert_eq!(r.fate_point(), Some(60));
        r.add_report(70);
        assert_eq!(r.fate_point(), Some(70));
        assert_eq!(r.report_missed(71, 80), (Some(70), true));
        assert!(r.missed(75) && !r.missed(60));
        assert!(
            !r.missed(65),
            "before the fate point they were recorded from"
        );
        assert!(r.missed(10), "in the missed fires before");
        assert_eq!(r.fate_point(), Some(80));
        assert_eq!(r.report_missed(81, 90), (Some(80), true));
        assert!(
            r.missed(75) && r.missed(85),
            "going on from the missed fires before"
        );
        assert_eq!(r.report_missed(100, 110), (Some(90), true));
        assert!(
            !r.missed(95),
            "before the reporter's first fire: still open in a process, which decides it"
        );
        assert!(r.missed(100) && r.missed(110) && r.missed(85));
    }
}

#[cfg(test)]
mod missed_fires {
    use super::*;
    use chrono::TimeDelta;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + TimeDelta::days(20_000) + TimeDelta::seconds(s)
    }

    /// A guard value whose busy answer got lost reported the fire itself: a report of missed
    /// fires through it by another process does not take it from its claim, which goes on as
    /// without the report; the fires after it are decided.
    #[tokio::test]
    async fn a_claimants_own_reported_fire_stays_its_own() {
        let dir = std::env::temp_dir().join(format!("cronguard-mf-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let (holder, late, starting) = (
            FileGuard::new(&dir, "job"),
            FileGuard::new(&dir, "job"),
            FileGuard::new(&dir, "job"),
        );
        let Claim::Acquired(lease) = holder.claim(t(1)).await.expect("answers") else {
            panic!("fire 1 is free");
        };
        assert!(matches!(
            late.claim(t(2)).await.expect("answers"),
            Claim::Busy { first_report: true }
        ));
        assert_eq!(
            starting.report_missed(t(2), t(3)).await.expect("answers"),
            Some(t(2)),
            "fire 2 was reported"
        );
        lease.release().await.expect("release");
        match late.claim(t(2)).await.expect("answers") {
            Claim::Acquired(lease) => lease.release().await.expect("release"),
            other => panic!("{other:?}, expected Acquired"),
        }
        assert!(matches!(
            late.claim(t(3)).await.expect("answers"),
            Claim::DroppedByAnother
        ));
        assert_ne!(
            starting.report_drop(t(3)).await.expect("answers"),
            DropReport::First
        );
        assert_eq!(late.fate_point().await.expect("answers"), Some(t(3)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod replaced_lock_file {
    use super::*;
    use chrono::TimeDelta;
    use std::process::{Child, Command};

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + TimeDelta::days(20_000) + TimeDelta::seconds(s)
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cronguard-fr-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    fn name(claim: &Claim) -> &'static str {
        match claim {
            Claim::Acquired(_) => "acquired",
            Claim::AlreadyRan => "already_ran",
            Claim::ClaimedByAnother => "claimed_by_another",
            Claim::DroppedByAnother => "dropped_by_another",
            Claim::Busy { .. } => "busy",
            Claim::Lapsed => "lapsed",
            Claim::TooLate { .. } => "too_late",
            Claim::TooEarly { .. } => "too_early",
            Claim::Superseded => "superseded",
            Claim::Paused { .. } => "paused",
        }
    }

    /// The answer to a claim of `fire`; an acquired lease is released at once.
    async fn answer(guard: &FileGuard, fire: i64) -> &'static str {
        let claim = guard.claim(t(fire)).await.expect("answers");
        let answer = name(&claim);
        if let Claim::Acquired(lease) = claim {
            lease.release().await.expect("release");
        }
        answer
    }

    async fn acquire(guard: &FileGuard, fire: i64) -> Box<dyn Lease> {
        match guard.claim(t(fire)).await.expect("answers") {
            Claim::Acquired(lease) => lease,
            other => panic!("fire {fire}: {other:?}, expected Acquired"),
        }
    }

    fn holder_of(guard: &FileGuard) -> Option<Holder> {
        let file = File::open(&guard.state_path).expect("state file");
        Record::read(&file).expect("record").holder
    }

    fn set_holder(guard: &FileGuard, holder: Option<Holder>) {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&guard.state_path)
            .expect("state file");
        let mut record = Record::read(&file).expect("record");
        record.holder = holder;
        record.write(&file).expect("write");
    }

    fn lock_file_id(guard: &FileGuard) -> FileId {
        FileId::of(&std::fs::metadata(&guard.lock_path).expect("lock file"))
    }

    /// A process that is alive until it is killed.
    fn sleeper() -> Child {
        Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("sleep starts")
    }

    /// A tmp cleaner removes `<job>.lock`, or a deploy step puts a new file in its place, while a
    /// run holds it: a second guard value (another process's view) must still answer busy.
    #[tokio::test]
    async fn a_removed_or_replaced_lock_file_does_not_let_a_second_run_start() {
        for how in ["removed", "replaced"] {
            let dir = scratch(how);
            let holder = FileGuard::new(&dir, "job");
            let other = FileGuard::new(&dir, "job");
            let lease = acquire(&holder, 1).await;
            let lock = dir.join("job.lock");
            if how == "removed" {
                std::fs::remove_file(&lock).expect("remove");
            } else {
                let fresh = dir.join("job.lock.new");
                std::fs::write(&fresh, b"").expect("write");
                std::fs::rename(&fresh, &lock).expect("replace");
            }
            for (guard, fire) in [(&other, 2), (&other, 3), (&holder, 4)] {
                assert_eq!(
                    answer(guard, fire).await,
                    "busy",
                    "{how}: fire {fire} while fire 1 runs"
                );
            }
            lease.release().await.expect("release");
            assert_eq!(holder_of(&other), None, "{how}: released");
            assert_eq!(
                answer(&other, 5).await,
                "acquired",
                "{how}: after the release"
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// A child process the application forks shares this process's open files until it runs its
    /// program: a lock this process lets go must be free even while such a copy is open. A `dup`
    /// of the descriptor is exactly the copy a forked child holds.
    #[test]
    fn a_lock_let_go_is_free_while_a_forked_child_still_shares_the_file() {
        let dir = scratch("forked");
        let guard = FileGuard::new(&dir, "job");
        let run = guard.try_lock_run().expect("opens").expect("free");
        let childs_copy = run.file.try_clone().expect("dup");
        drop(run);
        assert!(
            guard.try_lock_run().expect("opens").is_some(),
            "the run lock is free once let go"
        );
        let state = guard.lock_state().expect("state lock");
        let childs_state_copy = state.try_clone().expect("dup");
        drop(state);
        assert!(
            guard.lock_state_with(false).expect("opens").is_some(),
            "the state lock is free once let go"
        );
        drop((childs_copy, childs_state_copy));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn the_holder_is_recorded_while_the_run_lasts() {
        let dir = scratch("recorded");
        let guard = FileGuard::new(&dir, "job");
        let lease = acquire(&guard, 1).await;
        let holder = holder_of(&guard).expect("a holder while the lease is held");
        assert_eq!(holder.pid, std::process::id());
        assert_eq!(holder.file, lock_file_id(&guard));
        lease.release().await.expect("release");
        assert_eq!(holder_of(&guard), None, "released");
        // A lease dropped without release clears its record too: at once, as nothing else holds
        // the state lock here.
        drop(acquire(&guard, 2).await);
        assert_eq!(holder_of(&guard), None, "dropped");
        assert_eq!(answer(&guard, 3).await, "acquired");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Another process holds the run on an inode that is no longer at the path: busy while it
    /// lives, free once it died.
    #[tokio::test]
    async fn a_live_holder_elsewhere_keeps_a_replaced_lock_busy_and_a_dead_one_does_not() {
        let dir = scratch("elsewhere");
        let guard = FileGuard::new(&dir, "job");
        assert_eq!(answer(&guard, 1).await, "acquired");
        let elsewhere = |pid: u32| Holder {
            pid,
            start: process_start(pid).unwrap_or(0),
            file: FileId {
                ino: lock_file_id(&guard).ino + 1_000_000,
                ..lock_file_id(&guard)
            },
        };
        let mut child = sleeper();
        set_holder(&guard, Some(elsewhere(child.id())));
        assert_eq!(answer(&guard, 2).await, "busy", "the holder lives");
        assert_eq!(answer(&guard, 3).await, "busy", "the holder lives");
        child.kill().expect("kill");
        child.wait().expect("reap");
        assert_eq!(answer(&guard, 4).await, "acquired", "the holder died");
        // A holder whose pid now names a younger process is gone too.
        let mut child = sleeper();
        let reused = Holder {
            start: process_start(child.id()).map_or(0, |s| s.saturating_sub(1)),
            ..elsewhere(child.id())
        };
        set_holder(&guard, Some(reused));
        let expected = if cfg!(target_os = "linux") {
            "acquired"
        } else {
            "busy"
        };
        assert_eq!(answer(&guard, 5).await, expected, "a reused pid");
        // A record that names the inode the claim locked is stale, whoever it names.
        set_holder(
            &guard,
            Some(Holder {
                file: lock_file_id(&guard),
                ..elsewhere(child.id())
            }),
        );
        assert_eq!(answer(&guard, 6).await, "acquired", "the same inode");
        child.kill().expect("kill");
        child.wait().expect("reap");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_zombie_or_an_impossible_pid_holds_nothing() {
        assert!(!process_alive(0, 0));
        assert!(!process_alive(u32::MAX, 0), "kill(-1) must never be asked");
        assert!(process_alive(std::process::id(), own_start()));
        let mut child = sleeper();
        let pid = child.id();
        child.kill().expect("kill");
        // Not reaped yet: a zombie, whose locks the kernel already let go.
        #[cfg(target_os = "linux")]
        {
            use nix::sys::wait::{waitid, Id, WaitPidFlag};
            let raw = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("a pid"));
            waitid(Id::Pid(raw), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT).expect("exits");
            assert!(!process_alive(pid, 0), "a zombie");
        }
        child.wait().expect("reap");
        assert!(!process_alive(pid, 0), "reaped");
    }
}

#[cfg(all(test, unix))]
mod planted_links {
    use super::*;
    use chrono::TimeDelta;
    use std::os::unix::fs::PermissionsExt;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + TimeDelta::days(20_000) + TimeDelta::seconds(s)
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cronguard-pl-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    /// Another user plants `<job>.lock` or `<job>.state` as a link to a file of the service's
    /// user: the claim fails and names the link; the file behind it is neither written nor locked.
    #[tokio::test]
    async fn a_planted_symlink_is_never_followed() {
        for suffix in ["lock", "state"] {
            let dir = scratch(suffix);
            let victim = dir.join("victim");
            std::fs::write(&victim, b"precious").expect("write");
            std::os::unix::fs::symlink(&victim, dir.join(format!("job.{suffix}")))
                .expect("symlink");
            let guard = FileGuard::new(&dir, "job");
            match guard.claim(t(1)).await {
                Err(e) => {
                    let text = crate::error::Chain(&e).to_string();
                    let path = dir.join(format!("job.{suffix}"));
                    assert!(
                        text.starts_with(&format!("cannot use the lock file `{}`", path.display())),
                        "{text}"
                    );
                    assert!(text.contains("symbolic link"), "{text}");
                }
                Ok(claim) => panic!("{suffix}: {claim:?}, expected an error"),
            }
            assert_eq!(std::fs::read(&victim).expect("read"), b"precious");
            let file = File::open(&victim).expect("open");
            file.try_lock_exclusive()
                .expect("the file behind the link is not locked");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[tokio::test]
    async fn lock_files_are_created_private() {
        let dir = scratch("mode");
        let guard = FileGuard::new(&dir, "job");
        match guard.claim(t(1)).await.expect("answers") {
            Claim::Acquired(lease) => lease.release().await.expect("release"),
            other => panic!("{other:?}"),
        }
        for file in ["job.lock", "job.state"] {
            let mode = std::fs::metadata(dir.join(file))
                .expect("created")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{file}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod long_names {
    use super::*;
    use chrono::TimeDelta;

    /// The longest file name most file systems take (`NAME_MAX`).
    const NAME_MAX: usize = 255;

    fn fits(stem: &str) {
        for suffix in [".lock", ".state"] {
            assert!(
                stem.len() + suffix.len() <= NAME_MAX,
                "{} bytes: {stem}{suffix}",
                stem.len() + suffix.len()
            );
        }
    }

    #[test]
    fn fnv1a_matches_the_reference_values() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_long_job_name_gets_a_readable_prefix_and_a_hash() {
        let long = "a".repeat(300);
        let stem = file_stem(&long);
        fits(&stem);
        assert!(stem.starts_with(&"a".repeat(200)), "{stem}");
        assert_eq!(file_stem(&long), stem, "stable");
        // Percent-encoding triples a name's length; the cut never splits an escape, wherever
        // the escapes fall.
        for head in ["x", "xy", "xyz"] {
            let stem = file_stem(&format!("{head}{}", ".".repeat(120)));
            fits(&stem);
            let prefix = stem.split('~').next().expect("a prefix");
            assert!(prefix.ends_with("%2E"), "{stem}");
            assert!(prefix.len() >= MAX_STEM - 17 - 2, "{stem}");
        }
        // A name that fits keeps its old file.
        let fitting = "c".repeat(249);
        assert_eq!(file_stem(&fitting), fitting);
        fits(&fitting);
    }

    #[test]
    fn long_names_sharing_their_first_250_characters_stay_distinct() {
        let shared = "j".repeat(250);
        let names = [
            format!("{shared}::one"),
            format!("{shared}::two"),
            format!("{shared}x"),
            shared.clone(),
        ];
        let stems: Vec<String> = names.iter().map(|n| file_stem(n)).collect();
        for (i, a) in stems.iter().enumerate() {
            fits(a);
            for b in &stems[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    /// Real files: a claim of a job with a 300-character name works, and two long names that
    /// share their first 250 characters are two jobs (both held at once).
    #[tokio::test]
    async fn long_job_names_claim_real_files() {
        let dir = std::env::temp_dir().join(format!("cronguard-long-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let t = DateTime::<Utc>::UNIX_EPOCH + TimeDelta::days(20_000);
        let shared = "k".repeat(250);
        let mut held = Vec::new();
        for name in [
            "l".repeat(300),
            format!("{shared}::one"),
            format!("{shared}::two"),
        ] {
            match FileGuard::new(&dir, &name).claim(t).await {
                Ok(Claim::Acquired(lease)) => held.push(lease),
                other => panic!("{} characters: {other:?}", name.len()),
            }
        }
        for lease in held {
            lease.release().await.expect("release");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod stuck_state_lock {
    use super::*;
    use chrono::TimeDelta;

    /// Ample for a call that waits at most [`STATE_LOCK_WAIT`], on a loaded machine; a call
    /// that waits for the lock without a bound fails the test instead of hanging it.
    const ANSWERED_WITHIN: Duration = Duration::from_secs(15);

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + TimeDelta::days(20_000) + TimeDelta::seconds(s)
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cronguard-ss-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    /// A stuck holder of the state lock, as a frozen process would be: an open file description
    /// of its own, so the `flock` conflicts with the guard's as another process's would.
    fn hold_state(guard: &FileGuard) -> File {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&guard.state_path)
            .expect("state file");
        file.lock_exclusive().expect("state lock");
        file
    }

    /// A runtime whose blocking pool is small, so that leaked blocking threads would use it up.
    fn small_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(4)
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn a_claim_times_out_while_the_state_lock_is_stuck_and_acquires_once_it_is_let_go() {
        let dir = scratch("claim");
        let guard = FileGuard::new(&dir, "job");
        let holder = hold_state(&guard);
        let rt = small_runtime();
        let started = Instant::now();
        let stuck =
            rt.block_on(async { tokio::time::timeout(ANSWERED_WITHIN, guard.claim(t(1))).await });
        let waited = started.elapsed();
        // Let go before any assertion, so that a claim still waiting lets the runtime stop.
        drop(holder);
        let after =
            rt.block_on(async { tokio::time::timeout(ANSWERED_WITHIN, guard.claim(t(1))).await });
        let Ok(stuck) = stuck else {
            panic!("no answer within {ANSWERED_WITHIN:?} while the state lock was held");
        };
        let error = match stuck {
            Err(e) => e,
            Ok(claim) => panic!("{claim:?} while the state lock was held"),
        };
        assert_eq!(error.kind(), GuardErrorKind::Timeout, "{error}");
        let message = error.to_string();
        let path = guard.state_path.display().to_string();
        assert!(
            message.contains(&path) && message.contains("fuser"),
            "{message}"
        );
        assert!(waited >= STATE_LOCK_WAIT, "gave up after {waited:?}");
        match after {
            Ok(Ok(Claim::Acquired(lease))) => {
                rt.block_on(lease.release()).expect("release");
            }
            other => panic!("{other:?} once the state lock was let go, expected Acquired"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A release while the state lock is stuck frees the run at once and answers the timeout
    /// for the record it could not clear; the record's holder is then known to be gone.
    #[test]
    fn a_release_while_the_state_lock_is_stuck_times_out_and_leaves_the_job_free() {
        let dir = scratch("release");
        let guard = FileGuard::new(&dir, "job");
        let rt = small_runtime();
        let lease = match rt.block_on(guard.claim(t(1))) {
            Ok(Claim::Acquired(lease)) => lease,
            other => panic!("{other:?}, expected Acquired"),
        };
        let holder = hold_state(&guard);
        let released =
            rt.block_on(async { tokio::time::timeout(ANSWERED_WITHIN, lease.release()).await });
        drop(holder);
        let kind = released
            .expect("the release answers while the state lock is stuck")
            .map_err(|e| e.kind());
        assert_eq!(kind, Err(GuardErrorKind::Timeout));
        match rt.block_on(guard.claim(t(2))) {
            Ok(Claim::Acquired(lease)) => rt.block_on(lease.release()).expect("release"),
            other => panic!("{other:?} after the release, expected Acquired"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// More calls than blocking threads, of every kind that reads the state: each answers, and
    /// the pool is then free for other work (a plain `fn` job) while the lock is still stuck.
    #[test]
    fn calls_while_the_state_lock_is_stuck_do_not_use_up_the_blocking_pool() {
        let dir = scratch("pool");
        let guard = FileGuard::new(&dir, "job");
        let holder = hold_state(&guard);
        let rt = small_runtime();
        let (answers, plain) = rt.block_on(async {
            let mut calls = tokio::task::JoinSet::new();
            for i in 0..12_i64 {
                let g = guard.clone();
                calls.spawn(async move {
                    match i % 6 {
                        0 => g.claim(t(i)).await.map(drop),
                        1 => g.last_claimed().await.map(drop),
                        2 => g.fate_point().await.map(drop),
                        3 => g.report_drop(t(i)).await.map(drop),
                        4 => g.report_missed(t(0), t(i)).await.map(drop),
                        _ => g.pause().await.map(drop),
                    }
                });
            }
            let answers = tokio::time::timeout(ANSWERED_WITHIN, async {
                let mut kinds = Vec::new();
                while let Some(done) = calls.join_next().await {
                    kinds.push(done.expect("the call does not panic").map_err(|e| e.kind()));
                }
                kinds
            })
            .await;
            let plain =
                tokio::time::timeout(ANSWERED_WITHIN, tokio::task::spawn_blocking(|| 7)).await;
            (answers, plain)
        });
        drop(holder);
        let answers = answers.expect("every call answers while the state lock is stuck");
        assert_eq!(answers.len(), 12);
        assert!(
            answers.iter().all(|a| *a == Err(GuardErrorKind::Timeout)),
            "{answers:?}"
        );
        assert_eq!(
            plain
                .expect("a plain blocking task runs")
                .expect("no panic"),
            7
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
