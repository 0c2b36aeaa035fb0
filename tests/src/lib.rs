//! Support code for cronguard's integration tests: the record that replica processes append
//! to, helpers to read it, and the replica processes of the fault tests ([`replicas`]).

pub mod fleet;
pub mod replicas;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// Appends one line, followed by the current Unix time in ms, with a single `write` (atomic for
/// short lines on a local file system).
pub fn append_line(path: &str, line: &str) -> std::io::Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(format!("{line} {now}\n").as_bytes())
}

/// What every replica binary reads first: logs to stderr, the record file, and this replica's
/// clock (shifted by `CLOCK_OFFSET_MS`).
pub fn replica_setup() -> anyhow::Result<(String, cronguard::Clock)> {
    tracing_subscriber::fmt()
        .with_env_filter("cronguard=debug")
        .with_writer(std::io::stderr)
        .init();
    let record = std::env::var("RECORD")?;
    let offset = std::env::var("CLOCK_OFFSET_MS")
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0);
    let clock = cronguard::Clock::system().with_offset(chrono::TimeDelta::milliseconds(offset));
    Ok((record, clock))
}

/// The id of the run asked for with run key (or [`Monitor::trigger`] answer) `key`, without its
/// last hex digit so that it fits a record's signed field.
///
/// [`Monitor::trigger`]: cronguard::Monitor::trigger
pub fn manual_id(key: &str) -> Option<i64> {
    let (_, label) = key.rsplit_once('@')?;
    let id = cronguard::ManualRun::parse_label(label)?;
    i64::try_from(id >> 4).ok()
}

/// A numeric environment variable, or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One line of a replica record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `start` or `end`.
    pub what: String,
    /// The fire instant in Unix milliseconds.
    pub fire_ms: i64,
    /// The process that ran it.
    pub pid: u32,
    /// The run's fencing token (0 for events without one).
    pub token: u64,
    /// When it was written (Unix ms, the writer's own clock without test offsets).
    pub at_ms: i64,
}

/// Reads a record; a missing file is an empty record.
pub fn read_record(path: &Path) -> Vec<Entry> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            Some(Entry {
                what: f.next()?.to_owned(),
                fire_ms: f.next()?.parse().ok()?,
                pid: f.next()?.parse().ok()?,
                token: f.next()?.parse().ok()?,
                at_ms: f.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            })
        })
        .collect()
}

/// How many times each fire started, by fire instant.
pub fn starts_per_fire(entries: &[Entry]) -> BTreeMap<i64, Vec<u32>> {
    let mut map: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
    for e in entries.iter().filter(|e| e.what == "start") {
        map.entry(e.fire_ms).or_default().push(e.pid);
    }
    map
}

/// The Rust examples of the repository's README, compiled (and run, unless marked `no_run`) as
/// doc tests of this package, so that what the README shows keeps working. The published crate
/// `cronguard` has documentation of its own.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
