//! The control feed and roster of the `file` guard, in the lock dir:
//!
//! - `.cronguard-controls`: one request per line, `<Unix ms>\t<job>\t<action>\t<argument>`,
//!   appended with a single write (whole lines, never interleaved). It grows by a line per
//!   control. A reader's cursor is `<offset>:<length>:<hash>`: the byte offset of the end of the
//!   last line read, and the length and FNV-1a hash of that line, so that a file emptied in place
//!   (`truncate`), replaced or restored from a copy is told from the one the cursor was taken on
//!   even once it has grown past the offset again: it is then read from its start
//!   ([`FeedRead::restarted`]). Checking costs reading that one line again.
//! - `<job>.roster`: `<job>\t<schedule>\t<instance>\t<Unix ms>\t<due grace ms>`, the job as a
//!   process last announced it; the due grace is the misfire grace plus the jitter, and a file an
//!   earlier version wrote has none (four fields);
//! - `.cronguard-processes/<16 hex digits>`: one file per process present, named by the FNV-1a
//!   hash of its id and holding the id; its modification time is when it last attended.
//!
//! Fields are percent-encoded where they hold `%`, a tab or a line break.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{file_stem, open};
use crate::clock::epoch_millis;
use crate::guard::feed::{
    ControlAction, ControlFeed, ControlRequest, FeedRead, RosterEntry, SeenProcess, FEED_BATCH,
    PRESENCE_TTL,
};
use crate::guard::GuardError;
use crate::registry::BoxFuture;

/// The `file` guard's feed over one lock dir.
pub(crate) struct FileFeed {
    dir: PathBuf,
}

const CONTROLS: &str = ".cronguard-controls";
const ROSTER_SUFFIX: &str = "roster";
const PROCESSES: &str = ".cronguard-processes";

fn encode(field: &str) -> String {
    field
        .replace('%', "%25")
        .replace('\t', "%09")
        .replace('\n', "%0A")
        .replace('\r', "%0D")
}

fn decode(field: &str) -> String {
    field
        .replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%09", "\t")
        .replace("%25", "%")
}

fn millis(text: &str) -> Option<DateTime<Utc>> {
    DateTime::<Utc>::from_timestamp_millis(text.parse().ok()?)
}

/// The most bytes of the last line read that a cursor identifies the file by.
const MARK_MAX: usize = 64 * 1024;

/// Where a reader of the controls file stands: the end of the last line read, and that line
/// (at most its last [`MARK_MAX`] bytes) by length and hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    offset: u64,
    len: usize,
    hash: u64,
}

impl Cursor {
    const START: Cursor = Cursor {
        offset: 0,
        len: 0,
        hash: 0,
    };

    /// The cursor after `line`, which ends at `offset`.
    fn after(offset: u64, line: &[u8]) -> Self {
        let line = &line[line.len().saturating_sub(MARK_MAX)..];
        Cursor {
            offset,
            len: line.len(),
            hash: super::fnv1a64(line),
        }
    }

    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, ':');
        let cursor = Cursor {
            offset: parts.next()?.parse().ok()?,
            len: parts.next()?.parse().ok()?,
            hash: u64::from_str_radix(parts.next()?, 16).ok()?,
        };
        let at_start = cursor.offset == 0 && cursor.len == 0;
        (at_start || (1..=MARK_MAX).contains(&cursor.len) && cursor.len as u64 <= cursor.offset)
            .then_some(cursor)
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{:016x}", self.offset, self.len, self.hash)
    }
}

/// The last whole line of `bytes` (at most its last [`MARK_MAX`] bytes), and where it ends.
fn last_line(bytes: &[u8]) -> Option<(usize, &[u8])> {
    let end = bytes.iter().rposition(|b| *b == b'\n')? + 1;
    let start = bytes[..end - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    Some((end, &bytes[start..end]))
}

impl FileFeed {
    pub(crate) fn new(dir: &Path) -> Self {
        FileFeed {
            dir: dir.to_owned(),
        }
    }

    fn controls(&self) -> PathBuf {
        self.dir.join(CONTROLS)
    }

    fn err(path: &Path, source: std::io::Error) -> GuardError {
        super::file_error(path, source)
    }

    fn publish_blocking(&self, request: &ControlRequest) -> Result<(), GuardError> {
        let path = self.controls();
        // Created private and never through a link, as every file of the lock dir.
        drop(open(&path)?);
        let mut options = OpenOptions::new();
        options.append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(nix::libc::O_NOFOLLOW);
        }
        let mut file = options.open(&path).map_err(|e| Self::err(&path, e))?;
        let line = format!(
            "{}\t{}\t{}\t{}\n",
            epoch_millis(request.at),
            encode(&request.job),
            request.action.word(),
            encode(&request.action.argument())
        );
        file.write_all(line.as_bytes())
            .map_err(|e| Self::err(&path, e))
    }

    fn read_blocking(&self, cursor: Option<String>) -> Result<FeedRead, GuardError> {
        let path = self.controls();
        let mut file = match std::fs::symlink_metadata(&path) {
            Ok(_) => open(&path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Nothing to read yet; a file made later is read from its start.
                let restarted = cursor
                    .as_deref()
                    .and_then(Cursor::parse)
                    .is_some_and(|c| c.offset > 0);
                return Ok(FeedRead {
                    requests: Vec::new(),
                    cursor: Cursor::START.to_string(),
                    restarted,
                });
            }
            Err(e) => return Err(Self::err(&path, e)),
        };
        let err = |e| Self::err(&path, e);
        let len = file.metadata().map_err(err)?.len();
        let Some(cursor) = cursor else {
            // The end: after the last whole line (a line being written is read once whole).
            let tail = len.min(MARK_MAX as u64 + 1);
            let mut bytes = Vec::new();
            file.seek(SeekFrom::Start(len - tail)).map_err(err)?;
            (&mut file)
                .take(tail)
                .read_to_end(&mut bytes)
                .map_err(err)?;
            let end = match last_line(&bytes) {
                Some((end, line)) => Cursor::after(len - tail + end as u64, line),
                None => Cursor::START,
            };
            return Ok(FeedRead::on(Vec::new(), end.to_string()));
        };
        let cursor = Cursor::parse(&cursor).ok_or_else(|| {
            GuardError::invalid(format!(
                "the control feed's cursor `{cursor}` is not `<offset>:<length>:<hash>` of {}; read from the feed's end (no cursor) instead",
                path.display()
            ))
        })?;
        // The last line read, again, then what follows it.
        let mark = cursor.offset - cursor.len as u64;
        let mut bytes = Vec::new();
        if cursor.offset <= len {
            file.seek(SeekFrom::Start(mark)).map_err(err)?;
            (&mut file)
                .take(len - mark)
                .read_to_end(&mut bytes)
                .map_err(err)?;
        }
        let same = cursor == Cursor::START
            || cursor.offset <= len
                && bytes.len() >= cursor.len
                && super::fnv1a64(&bytes[..cursor.len]) == cursor.hash;
        let (from, mut next) = if same {
            bytes.drain(..cursor.len);
            (cursor.offset, cursor)
        } else {
            // Emptied, replaced or restored since: read it from its start.
            bytes.clear();
            file.seek(SeekFrom::Start(0)).map_err(err)?;
            (&mut file).take(len).read_to_end(&mut bytes).map_err(err)?;
            (0, Cursor::START)
        };
        let mut requests = Vec::new();
        let mut used = 0usize;
        for line in bytes.split_inclusive(|b| *b == b'\n') {
            if !line.ends_with(b"\n") || requests.len() == FEED_BATCH {
                break; // a line still being written, or the batch is full
            }
            used += line.len();
            next = Cursor::after(from + used as u64, line);
            let Ok(line) = std::str::from_utf8(line) else {
                continue;
            };
            let fields: Vec<&str> = line.trim_end_matches('\n').split('\t').collect();
            let [at, job, word, argument] = fields[..] else {
                continue;
            };
            let Some(at) = millis(at) else {
                continue;
            };
            if let Some(action) = ControlAction::parse(word, &decode(argument), at) {
                requests.push(ControlRequest {
                    job: decode(job),
                    action,
                    at,
                });
            }
        }
        Ok(FeedRead {
            requests,
            cursor: next.to_string(),
            restarted: !same,
        })
    }

    fn announce_blocking(&self, jobs: &[RosterEntry]) -> Result<(), GuardError> {
        for entry in jobs {
            let path = self
                .dir
                .join(format!("{}.{ROSTER_SUFFIX}", file_stem(&entry.job)));
            let grace = entry
                .due_grace
                .map(|g| format!("\t{}", g.as_millis()))
                .unwrap_or_default();
            let line = format!(
                "{}\t{}\t{}\t{}{grace}\n",
                encode(&entry.job),
                encode(&entry.schedule),
                encode(&entry.instance),
                epoch_millis(entry.at)
            );
            let mut file = open(&path)?;
            file.write_all(line.as_bytes())
                .and_then(|()| file.set_len(line.len() as u64))
                .map_err(|e| Self::err(&path, e))?;
        }
        Ok(())
    }

    fn roster_blocking(&self) -> Result<Vec<RosterEntry>, GuardError> {
        let dir = std::fs::read_dir(&self.dir).map_err(|e| Self::err(&self.dir, e))?;
        let mut entries = Vec::new();
        for item in dir.flatten() {
            let path = item.path();
            if path.extension().and_then(|e| e.to_str()) != Some(ROSTER_SUFFIX) {
                continue;
            }
            let mut text = String::new();
            open(&path)?
                .read_to_string(&mut text)
                .map_err(|e| Self::err(&path, e))?;
            let fields: Vec<&str> = text.trim_end_matches('\n').split('\t').collect();
            let (job, schedule, instance, at, due_grace) = match fields[..] {
                [job, schedule, instance, at] => (job, schedule, instance, at, None),
                [job, schedule, instance, at, grace] => match grace.parse() {
                    Ok(ms) => (job, schedule, instance, at, Some(Duration::from_millis(ms))),
                    Err(_) => continue,
                },
                _ => continue,
            };
            if let Some(at) = millis(at) {
                entries.push(RosterEntry {
                    job: decode(job),
                    schedule: decode(schedule),
                    instance: decode(instance),
                    at,
                    due_grace,
                });
            }
        }
        entries.sort_by(|a, b| a.job.cmp(&b.job));
        Ok(entries)
    }

    fn attend_blocking(&self, process: &str) -> Result<Vec<String>, GuardError> {
        let dir = self.dir.join(PROCESSES);
        std::fs::create_dir_all(&dir).map_err(|e| Self::err(&dir, e))?;
        let own = dir.join(format!("{:016x}", super::fnv1a64(process.as_bytes())));
        let mut file = open(&own)?;
        file.write_all(process.as_bytes())
            .and_then(|()| file.set_len(process.len() as u64))
            .map_err(|e| Self::err(&own, e))?;
        let now = std::time::SystemTime::now();
        let mut present = Vec::new();
        for item in std::fs::read_dir(&dir)
            .map_err(|e| Self::err(&dir, e))?
            .flatten()
        {
            let path = item.path();
            let age = item
                .metadata()
                .and_then(|m| m.modified())
                .map(|at| now.duration_since(at).unwrap_or_default());
            match age {
                Ok(age) if age <= PRESENCE_TTL => {
                    if let Ok(id) = std::fs::read_to_string(&path) {
                        present.push(id);
                    }
                }
                // Gone quiet: forgotten (another process may have removed it first).
                Ok(_) => {
                    let _ = std::fs::remove_file(&path);
                }
                Err(_) => {}
            }
        }
        Ok(present)
    }

    /// The processes of `.cronguard-processes/`, without attending or forgetting any.
    fn processes_blocking(&self) -> Result<Vec<SeenProcess>, GuardError> {
        let dir = self.dir.join(PROCESSES);
        let items = match std::fs::read_dir(&dir) {
            Ok(items) => items,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Self::err(&dir, e)),
        };
        let now = std::time::SystemTime::now();
        let mut seen = Vec::new();
        for item in items.flatten() {
            let path = item.path();
            let (Ok(at), Ok(id)) = (
                item.metadata().and_then(|m| m.modified()),
                std::fs::read_to_string(&path),
            ) else {
                // Forgotten by an attending process meanwhile.
                continue;
            };
            seen.push(SeenProcess {
                id,
                ago: now.duration_since(at).unwrap_or_default(),
            });
        }
        Ok(seen)
    }
}

fn blocking<T: Send + 'static>(
    dir: &Path,
    op: impl FnOnce(&FileFeed) -> Result<T, GuardError> + Send + 'static,
) -> BoxFuture<Result<T, GuardError>> {
    let feed = FileFeed::new(dir);
    Box::pin(async move {
        tokio::task::spawn_blocking(move || op(&feed))
            .await
            .map_err(super::blocking_failed)?
    })
}

impl ControlFeed for FileFeed {
    fn publish(&self, request: ControlRequest) -> BoxFuture<Result<(), GuardError>> {
        blocking(&self.dir, move |f| f.publish_blocking(&request))
    }

    fn read(&self, cursor: Option<String>) -> BoxFuture<Result<FeedRead, GuardError>> {
        blocking(&self.dir, move |f| f.read_blocking(cursor))
    }

    fn announce(&self, jobs: Vec<RosterEntry>) -> BoxFuture<Result<(), GuardError>> {
        blocking(&self.dir, move |f| f.announce_blocking(&jobs))
    }

    fn roster(&self) -> BoxFuture<Result<Vec<RosterEntry>, GuardError>> {
        blocking(&self.dir, FileFeed::roster_blocking)
    }

    fn attend(&self, process: &str) -> BoxFuture<Result<Vec<String>, GuardError>> {
        let process = process.to_owned();
        blocking(&self.dir, move |f| f.attend_blocking(&process))
    }

    fn processes(&self) -> BoxFuture<Result<Vec<SeenProcess>, GuardError>> {
        blocking(&self.dir, FileFeed::processes_blocking)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::control::ManualRun;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp_millis(1_767_225_600_000 + ms).expect("in range")
    }

    #[tokio::test]
    async fn the_lock_dir_lists_the_processes_present() {
        let dir = std::env::temp_dir().join(format!("cronguard-present-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let feed = FileFeed::new(&dir);
        crate::guard::feed::two_attend(&feed).await;
        let b = dir.join(PROCESSES).join(format!(
            "{:016x}",
            super::super::fnv1a64("b 2 0002".as_bytes())
        ));
        let long_ago = std::time::SystemTime::now() - PRESENCE_TTL - Duration::from_secs(1);
        std::fs::File::options()
            .write(true)
            .open(&b)
            .and_then(|f| f.set_modified(long_ago))
            .expect("ages a process");
        crate::guard::feed::listed_without_attending(&feed).await;
        assert!(b.exists(), "listing forgets nobody");
        crate::guard::feed::expect_alone(&feed).await;
        assert!(!b.exists(), "a process gone quiet is removed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn trigger(id: u64) -> ControlRequest {
        ControlRequest {
            job: "report".to_owned(),
            action: ControlAction::Trigger(ManualRun {
                id,
                requested_at: at(id as i64),
            }),
            at: at(id as i64),
        }
    }

    /// The ids of the trigger requests in `read`.
    fn triggers(read: &[ControlRequest]) -> Vec<u64> {
        read.iter()
            .filter_map(|r| match r.action {
                ControlAction::Trigger(run) => Some(run.id),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn requests_made_after_the_feed_was_truncated_or_replaced_are_read() {
        let dir = std::env::temp_dir().join(format!("cronguard-feed-cut-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let feed = FileFeed::new(&dir);
        // The triggers read after `cursor`, the next cursor, and whether the file was read
        // again from its start.
        let read_on = |cursor: String| {
            let feed = &feed;
            async move {
                let read = feed.read(Some(cursor)).await.expect("reads");
                (triggers(&read.requests), read.cursor, read.restarted)
            }
        };
        let cursor = feed.read(None).await.expect("reads").cursor;
        feed.publish(trigger(1)).await.expect("published");
        let (read, cursor, restarted) = read_on(cursor).await;
        assert_eq!((read, restarted), (vec![1], false));
        // Emptied in place, then as many lines as before and one more (lines of equal length).
        std::fs::File::options()
            .write(true)
            .open(dir.join(CONTROLS))
            .and_then(|f| f.set_len(0))
            .expect("truncates");
        for id in [2, 3] {
            feed.publish(trigger(id)).await.expect("published");
        }
        let (read, cursor, restarted) = read_on(cursor).await;
        assert_eq!((read, restarted), (vec![2, 3], true), "after truncate");
        // Replaced by another file as long as the cursor (a restored copy, say).
        let line = |id: u64| format!("{}\treport\ttrigger\t{id:016x}\n", epoch_millis(at(4)));
        std::fs::write(dir.join(CONTROLS), line(4) + &line(5)).expect("replaces");
        let (read, cursor, restarted) = read_on(cursor).await;
        assert_eq!((read, restarted), (vec![4, 5], true), "after a replacement");
        // Removed: a file made later is read from its start.
        std::fs::remove_file(dir.join(CONTROLS)).expect("removes");
        let (read, cursor, restarted) = read_on(cursor).await;
        assert_eq!((read, restarted), (vec![], true), "removed");
        feed.publish(trigger(6)).await.expect("published");
        let (read, cursor, restarted) = read_on(cursor).await;
        assert_eq!((read, restarted), (vec![6], false));
        // A line being written is read once whole, also by a reader that starts meanwhile.
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(CONTROLS))
            .expect("opens");
        let whole = line(7);
        let (head, tail) = whole.split_at(10);
        file.write_all(head.as_bytes()).expect("writes");
        let end = feed.read(None).await.expect("reads the end").cursor;
        let (read, cursor, restarted) = read_on(cursor).await;
        assert_eq!((read, restarted), (vec![], false), "half a line");
        file.write_all(tail.as_bytes()).expect("writes");
        let (read, _, restarted) = read_on(cursor).await;
        assert_eq!((read, restarted), (vec![7], false));
        let (read, _, restarted) = read_on(end).await;
        assert_eq!(
            (read, restarted),
            (vec![7], false),
            "from the end taken meanwhile"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn requests_come_back_in_order_after_the_cursor_and_the_roster_lists_jobs() {
        let dir = std::env::temp_dir().join(format!("cronguard-feed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let feed = FileFeed::new(&dir);
        let (none, start) = feed.read(None).await.expect("reads").parts();
        assert!(none.is_empty());
        let requests = [
            ControlRequest {
                job: "odd\tname%".to_owned(),
                action: ControlAction::Pause {
                    by: "ops\nteam".to_owned(),
                },
                at: at(1),
            },
            ControlRequest {
                job: "b".to_owned(),
                action: ControlAction::Trigger(ManualRun {
                    id: 0xfeed,
                    requested_at: at(2),
                }),
                at: at(2),
            },
        ];
        for r in &requests {
            feed.publish(r.clone()).await.expect("published");
        }
        let (read, next) = feed.read(Some(start)).await.expect("reads").parts();
        assert_eq!(read, requests);
        let (again, _) = feed.read(Some(next)).await.expect("reads").parts();
        assert!(again.is_empty(), "each request is read once");

        let entry = RosterEntry {
            job: "b".to_owned(),
            schedule: "every 10s".to_owned(),
            instance: "host:1".to_owned(),
            at: at(3),
            due_grace: Some(Duration::from_millis(70_250)),
        };
        feed.announce(vec![entry.clone()]).await.expect("announced");
        feed.announce(vec![entry.clone()])
            .await
            .expect("announced again");
        assert_eq!(
            feed.roster().await.expect("lists"),
            std::slice::from_ref(&entry)
        );

        // A file an earlier version wrote has no grace: it still reads.
        std::fs::write(
            dir.join("c.roster"),
            format!("c\tevery 5s\thost:2\t{}\n", epoch_millis(at(4))),
        )
        .expect("writes");
        let earlier = RosterEntry {
            job: "c".to_owned(),
            schedule: "every 5s".to_owned(),
            instance: "host:2".to_owned(),
            at: at(4),
            due_grace: None,
        };
        assert_eq!(feed.roster().await.expect("lists"), [entry, earlier]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
