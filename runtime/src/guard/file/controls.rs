//! Pause and manual runs of the `file` guard. Beside `<job>.state`, and like it read and written
//! only under the state lock, so that a claim sees a pause or not, never half of it:
//!
//! - `<job>.pause`: `<Unix ms> <by>` while the job is paused; absent otherwise.
//! - `<job>.manual`: the last [`MANUAL_KEPT`] manual runs claimed, one `<id hex> <claimant>` per
//!   line, so that a run asked for on several processes runs once.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::{open, FileGuard, FileLease, Held, Holder, Record};
use crate::clock::{epoch_millis, system_micros};
use crate::control::{ManualRun, Pause};
use crate::guard::{Claim, GuardError};

/// How many manual runs the `.manual` file remembers.
const MANUAL_KEPT: usize = 8;

/// A small file beside the state file, read and written whole.
struct Side {
    path: PathBuf,
}

impl Side {
    fn of(state_path: &Path, suffix: &str) -> Side {
        Side {
            path: state_path.with_extension(suffix),
        }
    }

    fn err(&self, source: std::io::Error) -> GuardError {
        super::file_error(&self.path, source)
    }

    fn read(&self) -> Result<String, GuardError> {
        let mut file = match std::fs::symlink_metadata(&self.path) {
            Ok(_) => open(&self.path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
            Err(e) => return Err(self.err(e)),
        };
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(|e| self.err(e))?;
        Ok(text)
    }

    fn write(&self, text: &str) -> Result<(), GuardError> {
        let mut file: File = open(&self.path)?;
        file.seek(SeekFrom::Start(0)).map_err(|e| self.err(e))?;
        file.write_all(text.as_bytes()).map_err(|e| self.err(e))?;
        file.set_len(text.len() as u64).map_err(|e| self.err(e))
    }

    fn remove(&self) -> Result<(), GuardError> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.err(e)),
            _ => Ok(()),
        }
    }
}

/// `<Unix ms> <by>`, with the name on one line.
fn format_pause(pause: &Pause) -> String {
    let by: String = pause
        .by
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("{} {by}\n", epoch_millis(pause.at))
}

fn parse_pause(text: &str) -> Option<Pause> {
    let line = text.lines().next()?;
    let (at, by) = line.split_once(' ')?;
    let at = DateTime::<Utc>::from_timestamp_millis(at.parse().ok()?)?;
    Some(Pause::new(by, at))
}

impl FileGuard {
    fn pause_file(&self) -> Side {
        Side::of(&self.state_path, "pause")
    }

    fn manual_file(&self) -> Side {
        Side::of(&self.state_path, "manual")
    }

    /// The pause, read under the state lock the caller holds.
    pub(super) fn paused_locked(&self) -> Result<Option<Pause>, GuardError> {
        Ok(parse_pause(&self.pause_file().read()?))
    }

    pub(super) fn set_pause_blocking(&self, pause: Option<Pause>) -> Result<(), GuardError> {
        let _state = self.lock_state()?;
        match pause {
            Some(p) => self.pause_file().write(&format_pause(&p)),
            None => self.pause_file().remove(),
        }
    }

    pub(super) fn pause_blocking(&self) -> Result<Option<Pause>, GuardError> {
        let _state = self.lock_state()?;
        self.paused_locked()
    }

    /// Answers `Paused` for fire `fire`, recording its report like a busy skip's.
    pub(super) fn paused_claim(
        &self,
        state_file: &File,
        record: &mut Record,
        fire: i64,
        pause: Pause,
    ) -> Result<Claim, GuardError> {
        let before = record.reported;
        let first_report = self.report_first(record, fire);
        if record.reported != before {
            record.write(state_file).map_err(|e| self.state_err(e))?;
        }
        Ok(Claim::Paused {
            pause,
            first_report,
        })
    }

    pub(super) fn claim_manual_blocking(&self, run: ManualRun) -> Result<Claim, GuardError> {
        let state_file = self.lock_state()?;
        let mut record = Record::read(&state_file).map_err(|e| self.state_err(e))?;
        let manual = self.manual_file();
        let mut taken: Vec<(u64, u64)> = manual
            .read()?
            .lines()
            .filter_map(|line| {
                let (id, claimant) = line.split_once(' ')?;
                Some((u64::from_str_radix(id, 16).ok()?, claimant.parse().ok()?))
            })
            .collect();
        if let Some((_, claimant)) = taken.iter().find(|(id, _)| *id == run.id) {
            // This guard value's own claim, repeated: its lease was dropped with the answer.
            return Ok(if *claimant == self.nonce {
                Claim::Lapsed
            } else {
                Claim::AlreadyRan
            });
        }
        let Some(lock) = self.try_lock_run()? else {
            return Ok(Claim::Busy { first_report: true });
        };
        if let Some(holder) = record.holder {
            if holder.file != lock.id && holder.is_alive() {
                return Ok(Claim::Busy { first_report: true });
            }
        }
        let holder = Holder::this_process(lock.id);
        record.token = (record.token + 1).max(system_micros());
        record.holder = Some(holder);
        taken.push((run.id, self.nonce));
        let keep = taken.len().saturating_sub(MANUAL_KEPT);
        let text: String = taken[keep..]
            .iter()
            .map(|(id, claimant)| format!("{id:016x} {claimant}\n"))
            .collect();
        manual.write(&text)?;
        record.write(&state_file).map_err(|e| self.state_err(e))?;
        super::held_here::add(lock.id);
        Ok(Claim::Acquired(Box::new(FileLease {
            held: Some(Held {
                run_file: lock.file,
                holder,
                guard: self.clone(),
            }),
            token: record.token,
        })))
    }
}
