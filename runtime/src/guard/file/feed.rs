//! The control feed and roster of the `file` guard, in the lock dir:
//!
//! - `.cronguard-controls`: one request per line, `<Unix ms>\t<job>\t<action>\t<argument>`,
//!   appended with a single write (whole lines, never interleaved); a reader's cursor is a byte
//!   offset. It grows by a line per control.
//! - `<job>.roster`: `<job>\t<schedule>\t<instance>\t<Unix ms>`, the job as a process last
//!   announced it.
//!
//! Fields are percent-encoded where they hold `%`, a tab or a line break.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::{file_stem, open};
use crate::clock::epoch_millis;
use crate::guard::feed::{ControlAction, ControlFeed, ControlRequest, RosterEntry, FEED_BATCH};
use crate::guard::GuardError;
use crate::registry::BoxFuture;

/// The `file` guard's feed over one lock dir.
pub(crate) struct FileFeed {
    dir: PathBuf,
}

const CONTROLS: &str = ".cronguard-controls";
const ROSTER_SUFFIX: &str = "roster";

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
        GuardError::File {
            path: path.to_owned(),
            source,
        }
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

    fn read_blocking(
        &self,
        cursor: Option<String>,
    ) -> Result<(Vec<ControlRequest>, String), GuardError> {
        let path = self.controls();
        let mut file = match std::fs::symlink_metadata(&path) {
            Ok(_) => open(&path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Vec::new(), cursor.unwrap_or_else(|| "0".to_owned())))
            }
            Err(e) => return Err(Self::err(&path, e)),
        };
        let len = file.metadata().map_err(|e| Self::err(&path, e))?.len();
        let Some(from) = cursor.and_then(|c| c.parse::<u64>().ok()) else {
            return Ok((Vec::new(), len.to_string()));
        };
        // A file shorter than the cursor was replaced: read it from its start.
        let from = if from > len { 0 } else { from };
        file.seek(SeekFrom::Start(from))
            .map_err(|e| Self::err(&path, e))?;
        let mut text = String::new();
        file.take(len - from)
            .read_to_string(&mut text)
            .map_err(|e| Self::err(&path, e))?;
        let mut requests = Vec::new();
        let mut used = 0usize;
        for line in text.split_inclusive('\n') {
            if !line.ends_with('\n') || requests.len() == FEED_BATCH {
                break; // a line still being written, or the batch is full
            }
            used += line.len();
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
        Ok((requests, (from + used as u64).to_string()))
    }

    fn announce_blocking(&self, jobs: &[RosterEntry]) -> Result<(), GuardError> {
        for entry in jobs {
            let path = self
                .dir
                .join(format!("{}.{ROSTER_SUFFIX}", file_stem(&entry.job)));
            let line = format!(
                "{}\t{}\t{}\t{}\n",
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
            if let [job, schedule, instance, at] = fields[..] {
                if let Some(at) = millis(at) {
                    entries.push(RosterEntry {
                        job: decode(job),
                        schedule: decode(schedule),
                        instance: decode(instance),
                        at,
                    });
                }
            }
        }
        entries.sort_by(|a, b| a.job.cmp(&b.job));
        Ok(entries)
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
            .map_err(GuardError::Join)?
    })
}

impl ControlFeed for FileFeed {
    fn publish(&self, request: ControlRequest) -> BoxFuture<Result<(), GuardError>> {
        blocking(&self.dir, move |f| f.publish_blocking(&request))
    }

    fn read(
        &self,
        cursor: Option<String>,
    ) -> BoxFuture<Result<(Vec<ControlRequest>, String), GuardError>> {
        blocking(&self.dir, move |f| f.read_blocking(cursor))
    }

    fn announce(&self, jobs: Vec<RosterEntry>) -> BoxFuture<Result<(), GuardError>> {
        blocking(&self.dir, move |f| f.announce_blocking(&jobs))
    }

    fn roster(&self) -> BoxFuture<Result<Vec<RosterEntry>, GuardError>> {
        blocking(&self.dir, FileFeed::roster_blocking)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::ManualRun;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp_millis(1_767_225_600_000 + ms).expect("in range")
    }

    #[tokio::test]
    async fn requests_come_back_in_order_after_the_cursor_and_the_roster_lists_jobs() {
        let dir = std::env::temp_dir().join(format!("cronguard-feed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let feed = FileFeed::new(&dir);
        let (none, start) = feed.read(None).await.expect("reads");
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
        let (read, next) = feed.read(Some(start)).await.expect("reads");
        assert_eq!(read, requests);
        let (again, _) = feed.read(Some(next)).await.expect("reads");
        assert!(again.is_empty(), "each request is read once");

        let entry = RosterEntry {
            job: "b".to_owned(),
            schedule: "every 10s".to_owned(),
            instance: "host:1".to_owned(),
            at: at(3),
        };
        feed.announce(vec![entry.clone()]).await.expect("announced");
        feed.announce(vec![entry.clone()])
            .await
            .expect("announced again");
        assert_eq!(feed.roster().await.expect("lists"), [entry]);
    }
}
