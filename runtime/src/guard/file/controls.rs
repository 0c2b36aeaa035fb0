//! Pause and manual runs of the `file` guard. Beside `<job>.state`, and like it read and written
//! only under the state lock, so that a claim sees a pause or not, never half of it:
//!
//! - `<job>.pause`: `<Unix ms> <by>` while the job is paused; absent otherwise.
//! - `<job>.manual`: the manual runs claimed, so that a run asked for on several processes runs
//!   once: a first line `v2 <Unix ms>`, the newest request forgotten, then one
//!   `<id hex> <claimant> <requested, Unix ms>` per run claimed. A run is kept for as long as a
//!   claim of it could be granted (its request is no older than the misfire grace) and at least
//!   [`MANUAL_RUNS_KEPT`](crate::guard::MANUAL_RUNS_KEPT); a claim of a forgotten one is refused. A file of an earlier version (lines `<id hex> <claimant>`, the
//!   last eight runs) is read as runs requested now.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{open, FileGuard, FileLease, Held, Holder, Record};
use crate::clock::{epoch_millis, system_micros};
use crate::control::{ManualRun, Pause};
use crate::guard::{Claim, GuardError};

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
        let first_report = self.report_first(record, fire) == super::DropReport::First;
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
        let now = epoch_millis(self.clock.now());
        let mut taken = Taken::parse(&manual.read()?, now);
        let requested = epoch_millis(run.requested_at);
        if let Some(claimant) = taken.claimant(run.id) {
            // This guard value's own claim, repeated: its lease was dropped with the answer.
            return Ok(if claimant == self.nonce {
                Claim::Lapsed
            } else {
                Claim::AlreadyRan
            });
        }
        if requested <= taken.forgotten {
            return Ok(Claim::AlreadyRan);
        }
        let grace = i64::try_from(self.misfire_grace.as_millis()).unwrap_or(i64::MAX);
        let late = now.saturating_sub(requested);
        if late > grace {
            return Ok(Claim::TooLate {
                late: Duration::from_millis(u64::try_from(late).unwrap_or(0)),
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
        let kept = i64::try_from(crate::guard::MANUAL_RUNS_KEPT.as_millis()).unwrap_or(i64::MAX);
        taken.forget_before(now.saturating_sub(grace.max(kept)));
        taken.runs.push((run.id, self.nonce, requested));
        manual.write(&taken.format())?;
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

/// The manual runs claimed, as the `.manual` file keeps them (see the module documentation).
#[derive(Debug, Default, PartialEq, Eq)]
struct Taken {
    /// The newest request forgotten (Unix ms): a claim of a run requested then or before is
    /// refused, since it may be one of the runs forgotten.
    forgotten: i64,
    /// Each run's id, claimant and request (Unix ms).
    runs: Vec<(u64, u64, i64)>,
}

impl Taken {
    /// Reads the file; a run of an earlier version's file counts as requested at `now`, so that
    /// it is kept one grace more.
    fn parse(text: &str, now: i64) -> Taken {
        let mut lines = text.lines().peekable();
        let forgotten = lines
            .peek()
            .and_then(|line| line.strip_prefix("v2 "))
            .and_then(|ms| ms.parse().ok());
        if forgotten.is_some() {
            lines.next();
        }
        let runs = lines
            .filter_map(|line| {
                let mut fields = line.split(' ');
                let id = u64::from_str_radix(fields.next()?, 16).ok()?;
                let claimant = fields.next()?.parse().ok()?;
                let requested = match fields.next() {
                    Some(ms) => ms.parse().ok()?,
                    None => now,
                };
                Some((id, claimant, requested))
            })
            .collect();
        Taken {
            forgotten: forgotten.unwrap_or(i64::MIN),
            runs,
        }
    }

    fn claimant(&self, id: u64) -> Option<u64> {
        self.runs
            .iter()
            .find(|(run, _, _)| *run == id)
            .map(|(_, claimant, _)| *claimant)
    }

    /// Forgets the runs requested before `cut`.
    fn forget_before(&mut self, cut: i64) {
        let forgotten = &mut self.forgotten;
        self.runs.retain(|(_, _, requested)| {
            let keep = *requested >= cut;
            if !keep {
                *forgotten = (*forgotten).max(*requested);
            }
            keep
        });
    }

    fn format(&self) -> String {
        let mut text = format!("v2 {}\n", self.forgotten);
        for (id, claimant, requested) in &self.runs {
            text.push_str(&format!("{id:016x} {claimant} {requested}\n"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::Taken;

    #[test]
    fn an_earlier_versions_ring_is_read_as_runs_requested_now() {
        let taken = Taken::parse("00000000000000ab 7\n00000000000000cd 9\n", 1_000);
        assert_eq!(
            taken,
            Taken {
                forgotten: i64::MIN,
                runs: vec![(0xab, 7, 1_000), (0xcd, 9, 1_000)],
            }
        );
    }

    #[test]
    fn forgotten_runs_move_the_mark_and_the_file_reads_back() {
        let mut taken = Taken::parse("v2 5\n0000000000000001 7 10\n0000000000000002 7 30\n", 0);
        taken.forget_before(20);
        assert_eq!(taken.forgotten, 10);
        assert_eq!(taken.runs, vec![(2, 7, 30)]);
        assert_eq!(Taken::parse(&taken.format(), 0), taken);
    }
}
