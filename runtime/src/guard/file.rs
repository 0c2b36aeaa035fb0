//! `lock = "file"`: an exclusive `flock` per job, shared by every process of one host.
//!
//! Two files per job in the lock dir:
//!
//! - `<job>.lock`, the run lock: held (`flock`, exclusive, non-blocking try) for the whole run.
//!   The kernel releases it when the process dies, however it dies.
//! - `<job>.state`, the claim record: the last claimed fire, the last fencing token and the last
//!   dropped fire reported (so that a drop is reported at warn level once). It is read and written only under its own exclusive `flock`, held for
//!   the few microseconds of a claim.
//!
//! A claim takes the state lock, answers `AlreadyRan` when the recorded fire is `>= T`, otherwise
//! tries the run lock (`Busy` when another process holds it) and records `T` before it lets the
//! state lock go. Because the record is written under the state lock before anyone else can read
//! it, a process whose timer wakes a few milliseconds late sees `AlreadyRan`, never a free lock.
//! The run lock is a separate file because it is held for the whole run, while other processes
//! must still read the record to tell "this fire already ran" from "an older fire is running".

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use fs2::FileExt;

use super::{Claim, Guard, GuardError, Lease};
use crate::clock::{epoch_millis, system_micros};
use crate::registry::BoxFuture;

pub(crate) struct FileGuard {
    lock_path: PathBuf,
    state_path: PathBuf,
}

impl FileGuard {
    pub(crate) fn new(dir: &Path, job: &str) -> Self {
        let stem = file_stem(job);
        FileGuard {
            lock_path: dir.join(format!("{stem}.lock")),
            state_path: dir.join(format!("{stem}.state")),
        }
    }

    fn claim_blocking(&self, fire: i64) -> Result<Claim, GuardError> {
        let state_file = open(&self.state_path)?;
        state_file.lock_exclusive().map_err(|e| self.state_err(e))?;
        // The state lock is released when `state_file` is dropped at the end of this function.
        let mut record = Record::read(&state_file).map_err(|e| self.state_err(e))?;
        if record.last_fire >= fire {
            return Ok(Claim::AlreadyRan);
        }
        let run_file = open(&self.lock_path)?;
        match run_file.try_lock_exclusive() {
            Ok(()) => {}
            Err(e) if is_contended(&e) => {
                let first_report = record.last_reported < fire;
                if first_report {
                    record.last_reported = fire;
                    record.write(&state_file).map_err(|e| self.state_err(e))?;
                }
                return Ok(Claim::Busy { first_report });
            }
            Err(e) => {
                return Err(GuardError::File {
                    path: self.lock_path.clone(),
                    source: e,
                })
            }
        }
        record.last_fire = fire;
        // Never below the clock in microseconds, so a lost state file cannot send tokens back.
        record.token = (record.token + 1).max(system_micros());
        record.write(&state_file).map_err(|e| self.state_err(e))?;
        Ok(Claim::Acquired(Box::new(FileLease {
            run_file,
            token: record.token,
        })))
    }

    /// Runs `f` on the record under the state lock; writes the record back when `f` says so.
    fn with_record<T>(&self, f: impl FnOnce(&mut Record) -> (T, bool)) -> Result<T, GuardError> {
        let state_file = open(&self.state_path)?;
        state_file.lock_exclusive().map_err(|e| self.state_err(e))?;
        let mut record = Record::read(&state_file).map_err(|e| self.state_err(e))?;
        let (answer, changed) = f(&mut record);
        if changed {
            record.write(&state_file).map_err(|e| self.state_err(e))?;
        }
        Ok(answer)
    }

    fn state_err(&self, source: std::io::Error) -> GuardError {
        GuardError::File {
            path: self.state_path.clone(),
            source,
        }
    }
}

impl FileGuard {
    /// Runs a blocking operation on the blocking pool.
    fn blocking<T: Send + 'static>(
        &self,
        op: impl FnOnce(&FileGuard) -> Result<T, GuardError> + Send + 'static,
    ) -> BoxFuture<Result<T, GuardError>> {
        let guard = FileGuard {
            lock_path: self.lock_path.clone(),
            state_path: self.state_path.clone(),
        };
        Box::pin(async move {
            tokio::task::spawn_blocking(move || op(&guard))
                .await
                .map_err(|e| GuardError::Task(e.to_string()))?
        })
    }
}

impl Guard for FileGuard {
    fn claim(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
        let fire = epoch_millis(fire_time);
        self.blocking(move |g| g.claim_blocking(fire))
    }

    fn first_report(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<bool, GuardError>> {
        let fire = epoch_millis(fire_time);
        self.blocking(move |g| {
            g.with_record(|r| {
                let first = r.last_reported < fire;
                if first {
                    r.last_reported = fire;
                }
                (first, first)
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
}

struct FileLease {
    run_file: File,
    token: u64,
}

impl Lease for FileLease {
    fn fencing_token(&self) -> u64 {
        self.token
    }

    fn release(self: Box<Self>) -> BoxFuture<Result<(), GuardError>> {
        // Closing the file releases the flock; unlocking first makes the release explicit.
        let _ = FileExt::unlock(&self.run_file);
        drop(self);
        Box::pin(async { Ok(()) })
    }
}

fn open(path: &Path) -> Result<File, GuardError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|source| GuardError::File {
            path: path.to_owned(),
            source,
        })
}

fn is_contended(e: &std::io::Error) -> bool {
    e.raw_os_error() == fs2::lock_contended_error().raw_os_error()
        || e.kind() == std::io::ErrorKind::WouldBlock
}

/// The claim record: one fixed-width line, rewritten in place with a single write so that a
/// process killed at any moment leaves either the old or the new record.
#[derive(Debug, Default, PartialEq, Eq)]
struct Record {
    last_fire: i64,
    token: u64,
    last_reported: i64,
}

/// `v1`, three right-aligned 20-character numbers (wide enough for any `i64`/`u64`), newline.
const RECORD_LEN: usize = 2 + 3 * (1 + 20) + 1;

impl Record {
    fn read(mut file: &File) -> std::io::Result<Record> {
        let mut text = String::new();
        file.seek(SeekFrom::Start(0))?;
        file.read_to_string(&mut text)?;
        // An empty or unreadable record is a new job (or a wiped lock dir): start from zero;
        // tokens still rise because they never go below the clock.
        Ok(Record::parse(&text).unwrap_or_default())
    }

    fn parse(text: &str) -> Option<Record> {
        let mut fields = text.trim().strip_prefix("v1 ")?.split_whitespace();
        let record = Record {
            last_fire: fields.next()?.parse().ok()?,
            token: fields.next()?.parse().ok()?,
            last_reported: fields.next()?.parse().ok()?,
        };
        Some(record)
    }

    fn format(&self) -> String {
        format!(
            "v1 {:>20} {:>20} {:>20}\n",
            self.last_fire, self.token, self.last_reported
        )
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

/// A file name for a job name: `::` becomes `.`, characters other than ASCII letters, digits,
/// `_` and `-` are percent-encoded, so distinct names never share a file.
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
    out
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
        let r = Record {
            last_fire: 1_767_225_600_000,
            token: 42,
            last_reported: -1,
        };
        assert_eq!(r.format().len(), RECORD_LEN);
        assert_eq!(Record::parse(&r.format()), Some(r));
        assert_eq!(Record::parse("garbage"), None);
    }
}
