//! The recent history of a `file` job: `<job>.history` beside its state file, one line per entry
//! ([`crate::history::line`]), appended under the state lock and cut back to the newest entries
//! (by fire) once it holds about twice as many as it keeps.

use std::io::{Read, Seek, SeekFrom, Write};

use chrono::{DateTime, Utc};

use super::{file_error, open, FileGuard};
use crate::clock::epoch_millis;
use crate::guard::GuardError;
use crate::history::{line, HistoryEntry, HISTORY_LIMIT};

/// The bytes of a line, about: a file longer than this many per entry kept is cut back.
const LINE_BYTES: u64 = 160;

impl FileGuard {
    fn history_path(&self) -> std::path::PathBuf {
        self.state_path.with_extension("history")
    }

    pub(super) fn record_history_blocking(&self, entry: &HistoryEntry) -> Result<(), GuardError> {
        let _state = self.lock_state()?;
        let path = self.history_path();
        let err = |e| file_error(&path, e);
        let mut file = open(&path)?;
        let duration = entry
            .started
            .zip(entry.ended)
            .and_then(|(started, ended)| (ended - started).to_std().ok());
        let mut text = line::whole(entry, duration, self.clock.now());
        text.push('\n');
        let end = file.seek(SeekFrom::End(0)).map_err(err)?;
        file.write_all(text.as_bytes()).map_err(err)?;
        let kept = self.history_kept.kept as u64;
        if end + text.len() as u64 > kept.saturating_mul(2 * LINE_BYTES) {
            let mut all = String::new();
            file.seek(SeekFrom::Start(0)).map_err(err)?;
            file.read_to_string(&mut all).map_err(err)?;
            let oldest = epoch_millis(self.clock.now())
                - i64::try_from(self.history_kept.retention.as_millis()).unwrap_or(i64::MAX);
            let mut lines: Vec<(i64, &str)> = all
                .lines()
                .filter_map(|l| Some((fire_of(l)?, l)))
                .filter(|(fire, _)| *fire >= oldest)
                .collect();
            lines.sort_by_key(|(fire, _)| *fire);
            let cut = lines.len().saturating_sub(self.history_kept.kept);
            let mut kept_text = String::with_capacity(all.len());
            for (_, l) in &lines[cut..] {
                kept_text.push_str(l);
                kept_text.push('\n');
            }
            file.seek(SeekFrom::Start(0)).map_err(err)?;
            file.write_all(kept_text.as_bytes()).map_err(err)?;
            file.set_len(kept_text.len() as u64).map_err(err)?;
        }
        Ok(())
    }

    pub(super) fn read_history_blocking(
        &self,
        job: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<HistoryEntry>, GuardError> {
        let path = self.history_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(file_error(&path, e)),
        };
        let mut entries: Vec<HistoryEntry> =
            text.lines().filter_map(|l| line::parse(job, l)).collect();
        entries.sort_by_key(|e| e.fire_time);
        // The file holds up to about twice what is kept until it is cut back.
        let newest = entries.len().saturating_sub(self.history_kept.kept);
        entries.drain(..newest);
        let oldest = epoch_millis(self.clock.now()).saturating_sub(
            i64::try_from(self.history_kept.retention.as_millis()).unwrap_or(i64::MAX),
        );
        entries.retain(|e| e.fire_time >= since && epoch_millis(e.fire_time) >= oldest);
        entries.truncate(HISTORY_LIMIT);
        Ok(entries)
    }
}

/// The fire of a line (its second field).
fn fire_of(l: &str) -> Option<i64> {
    l.split('\t').nth(1)?.parse().ok()
}
