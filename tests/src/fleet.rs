//! The fleet of Redis-guarded replicas (`fleet_worker`) the rolling-restart and ownership tests
//! run: spawning, stopping and killing them, and reading what they recorded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The processes that started a fire, each with when (Unix ms).
pub type Starts = Vec<(u32, i64)>;

/// What the replicas recorded: runs started, drops reported at warn level, claims lost, runs
/// that blocked their thread.
#[derive(Default)]
pub struct Record {
    /// (job, fire ms) → the processes that started it, with when (Unix ms).
    pub starts: BTreeMap<(u32, i64), Starts>,
    /// (job, first fire ms, last fire ms, pid) of every warn-level report.
    pub warns: Vec<(u32, i64, i64, u32)>,
    /// (job, pid, when reported, Unix ms) of every warn-level report, in the order of `warns`.
    pub warned_at: Vec<(u32, u32, i64)>,
    /// (job, fire ms, pid) of every claim that found the fire taken by another replica.
    pub lost: Vec<(u32, i64, u32)>,
    /// (job, fire ms, pid) of every run that blocked its thread (`BLOCK_AT_MS`).
    pub blocks: Vec<(u32, i64, u32)>,
}

impl Record {
    /// How long after `since` (Unix ms) a process other than `gone` had decided — run, or
    /// reported at warn level — a fire from `from` on of every one of `jobs`: the longest of
    /// them, or -1 when none was.
    pub fn decided_elsewhere<'a>(
        &self,
        jobs: impl IntoIterator<Item = &'a u32>,
        from: i64,
        gone: u32,
        since: i64,
    ) -> i64 {
        jobs.into_iter()
            .filter_map(|job| {
                let ran = self
                    .starts
                    .range((*job, from)..(*job, i64::MAX))
                    .filter(|(_, runs)| runs[0].0 != gone)
                    .map(|(_, runs)| runs[0].1);
                let reported = self
                    .warned_at
                    .iter()
                    .filter(|(j, pid, at)| j == job && *pid != gone && *at > since)
                    .map(|(_, _, at)| *at);
                ran.chain(reported).min().map(|at| at - since)
            })
            .max()
            .unwrap_or(-1)
    }

    /// Up to five fires that started more than once, with their starts.
    pub fn started_twice(&self) -> Vec<(&(u32, i64), &Starts)> {
        self.starts
            .iter()
            .filter(|(_, runs)| runs.len() > 1)
            .take(5)
            .collect()
    }

    /// The fires of `jobs` (each due every second) from `from` to `until` that neither started
    /// nor were reported at warn level.
    pub fn undecided<'a>(
        &self,
        jobs: impl IntoIterator<Item = &'a u32>,
        from: i64,
        until: i64,
    ) -> Vec<(u32, i64)> {
        jobs.into_iter()
            .flat_map(|job| (from..=until).step_by(1_000).map(move |fire| (*job, fire)))
            .filter(|(job, fire)| {
                !self.starts.contains_key(&(*job, *fire)) && !self.warned(*job, *fire)
            })
            .collect()
    }

    /// Up to five warn-level reports (job, first, last, pid) whose fires (each due every second)
    /// include one that started somewhere: one fate per fire is broken.
    pub fn warned_yet_started(&self) -> Vec<(u32, i64, i64, u32)> {
        self.warns
            .iter()
            .filter(|(job, first, last, _)| {
                self.starts
                    .range((*job, *first)..=(*job, *last))
                    .next()
                    .is_some()
            })
            .take(5)
            .copied()
            .collect()
    }

    /// Up to five fires (job, fire ms, each due every second) of `jobs` from `from` to `until`
    /// that more than one process reported at warn level, with those processes.
    pub fn warned_by_two<'a>(
        &self,
        jobs: impl IntoIterator<Item = &'a u32>,
        from: i64,
        until: i64,
    ) -> Vec<((u32, i64), Vec<u32>)> {
        jobs.into_iter()
            .flat_map(|job| (from..=until).step_by(1_000).map(move |fire| (*job, fire)))
            .filter_map(|(job, fire)| {
                let mut pids: Vec<u32> = self
                    .warns
                    .iter()
                    .filter(|(j, first, last, _)| *j == job && *first <= fire && fire <= *last)
                    .map(|(_, _, _, pid)| *pid)
                    .collect();
                pids.sort_unstable();
                pids.dedup();
                (pids.len() > 1).then_some(((job, fire), pids))
            })
            .take(5)
            .collect()
    }

    /// Whether fire `fire` of `job` was reported at warn level by any replica.
    pub fn warned(&self, job: u32, fire: i64) -> bool {
        self.warns
            .iter()
            .any(|(j, first, last, _)| *j == job && *first <= fire && fire <= *last)
    }
}

/// Reads the record the replicas appended to.
pub fn read(path: &Path) -> Record {
    let mut record = Record::default();
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<i64>().ok());
        match (f.first().copied(), num(1), num(2), num(3)) {
            (Some("start"), Some(job), Some(fire), Some(pid)) => record
                .starts
                .entry((job as u32, fire))
                .or_default()
                .push((pid as u32, num(4).unwrap_or(0))),
            (Some("warn"), Some(job), Some(last), Some(pid)) => {
                let first = num(4).unwrap_or(last);
                record.warns.push((job as u32, first, last, pid as u32));
                record
                    .warned_at
                    .push((job as u32, pid as u32, num(5).unwrap_or(0)));
            }
            (Some("lost"), Some(job), Some(fire), Some(pid)) => {
                record.lost.push((job as u32, fire, pid as u32));
            }
            (Some("block"), Some(job), Some(fire), Some(pid)) => {
                record.blocks.push((job as u32, fire, pid as u32));
            }
            _ => {}
        }
    }
    record
}

/// A new empty folder for one test's record and logs, named after `name` and this process.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cronguard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Starts a `fleet_worker` (`worker`, its path) recording into `dir/record`, logging into
/// `dir/replica-<n>.log`, with `env` on top of its defaults.
pub fn spawn(worker: &str, dir: &Path, redis: &str, n: usize, env: &[(&str, &str)]) -> Child {
    let mut command = Command::new(worker);
    command
        .env("RECORD", dir.join("record"))
        .env("CRONGUARD_REDIS_URL", redis)
        .stderr(std::fs::File::create(dir.join(format!("replica-{n}.log"))).expect("log"));
    for (key, value) in env {
        command.env(key, value);
    }
    command.spawn().expect("the worker binary starts")
}

/// Waits (bounded) until `pid` has started runs of at least one fire instant after `after`.
pub fn wait_running(dir: &Path, pid: u32, after: i64) {
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        let record = read(&dir.join("record"));
        let fresh = record
            .starts
            .iter()
            .any(|((_, fire), runs)| *fire > after && runs.iter().any(|(p, _)| *p == pid));
        if fresh {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "replica {pid} ran nothing within 30 s; logs in {}",
        dir.display()
    );
}

/// Sleeps until a few milliseconds after the next fire instant (a whole second), when the fires
/// of that instant are due and not all claimed yet: the moment a fault makes the most of (the
/// fault injection is timed; nothing waits for an outcome this way). Answers the instant.
pub fn just_after_an_instant() -> i64 {
    let into_second = now_ms().rem_euclid(1_000);
    std::thread::sleep(Duration::from_millis((1_000 - into_second + 3) as u64));
    now_ms() / 1_000 * 1_000
}

/// Sends `signal` (`STOP`, `CONT`, `TERM`) to process `pid`, without waiting for anything.
pub fn send(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill -{signal} {pid}");
}

/// Sends `signal` (`TERM`, `KILL`) to `child` and waits for it; a SIGTERM must end it cleanly.
pub fn signal(child: &mut Child, signal: &str) {
    send(child.id(), signal);
    let status = child.wait().expect("wait");
    if signal == "TERM" {
        assert!(
            status.success(),
            "replica {} exited with {status}",
            child.id()
        );
    }
}

/// The current Unix time in ms.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
