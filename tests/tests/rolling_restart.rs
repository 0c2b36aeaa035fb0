//! A rolling deploy under load: three replicas run 300 Redis-guarded jobs due every second
//! (300 fires a second), and each replica in turn is stopped gracefully (SIGTERM) and started
//! again while the other two go on. No fire starts twice, and no fire that started anywhere is
//! reported at warn level by any replica (docs/design/guarantees.md): a stopping replica leaves
//! the fires it never claimed to the replicas that go on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Child;

use cronguard_testkit::RedisServer;
use cronguard_tests::fleet::{self, now_ms, read, wait_running};

const WORKER: &str = env!("CARGO_BIN_EXE_fleet_worker");
const JOBS: usize = 300;

fn spawn(dir: &Path, redis: &str, n: usize) -> Child {
    fleet::spawn(WORKER, dir, redis, n, &[("JOBS", &JOBS.to_string())])
}

fn term(child: &mut Child) {
    fleet::signal(child, "TERM");
}

/// Stops `child` gracefully a few milliseconds after a fire instant (see
/// [`fleet::just_after_an_instant`]).
fn term_after_an_instant(child: &mut Child) {
    fleet::just_after_an_instant();
    term(child);
}

#[test]
fn a_rolling_restart_under_load_reports_no_fire_that_ran() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let dir = fleet::scratch_dir("rolling");
    let url = redis.url();
    let mut replicas: Vec<Child> = (0..3).map(|n| spawn(&dir, &url, n)).collect();
    let begun = now_ms();
    for r in &replicas {
        wait_running(&dir, r.id(), begun);
    }
    let rolled_from = now_ms();
    for (i, replica) in replicas.iter_mut().enumerate() {
        term_after_an_instant(replica);
        let since = now_ms();
        *replica = spawn(&dir, &url, 3 + i);
        let pid = replica.id();
        // The new replica takes its share for a while before the next one stops.
        wait_running(&dir, pid, since + 2_000);
    }
    let rolled_until = now_ms();
    // Two more seconds of fires after the roll, then every replica stops.
    wait_running(&dir, replicas[0].id(), rolled_until + 2_000);
    for r in &mut replicas {
        term(r);
    }
    let record = read(&dir.join("record"));

    let twice = record.started_twice();
    assert!(twice.is_empty(), "fires started more than once: {twice:?}");
    let started: BTreeSet<(u32, i64)> = record.starts.keys().copied().collect();
    let false_alarms: Vec<_> = record
        .warns
        .iter()
        .filter(|(job, first, last, _)| {
            started
                .range((*job, *first)..=(*job, *last))
                .next()
                .is_some()
        })
        .take(5)
        .collect();
    assert!(
        false_alarms.is_empty(),
        "{} warn-level reports of fires that ran elsewhere, e.g. (job, first, last, pid) {false_alarms:?}; logs in {}",
        record
            .warns
            .iter()
            .filter(|(job, first, last, _)| started.range((*job, *first)..=(*job, *last)).next().is_some())
            .count(),
        dir.display()
    );
    // Every fire of the roll ran somewhere or was reported at warn level: two replicas were up
    // throughout.
    let fires: BTreeSet<i64> = record.starts.keys().map(|(_, f)| *f).collect();
    let inner: Vec<i64> = fires
        .iter()
        .copied()
        .filter(|f| *f > rolled_from + 1_000 && *f < rolled_until - 1_000)
        .collect();
    let mut lost = Vec::new();
    for fire in &inner {
        for job in 0..JOBS as u32 {
            let ran = started.contains(&(job, *fire));
            if !ran && !record.warned(job, *fire) {
                lost.push((job, *fire));
            }
        }
    }
    assert!(
        lost.is_empty(),
        "{} fires of the roll neither ran nor were reported, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    eprintln!(
        "rolling restart: {} fires ran, {} warn-level reports, {} fire instants during the roll checked",
        record.starts.len(),
        record.warns.len(),
        inner.len()
    );
    let mut by_instant: BTreeMap<(i64, u32), usize> = BTreeMap::new();
    for (_, _, last, pid) in &record.warns {
        *by_instant.entry((*last, *pid)).or_default() += 1;
    }
    eprintln!("warn-level reports by (fire, pid): {by_instant:?}; roll from {rolled_from} to {rolled_until}");
    let _ = std::fs::remove_dir_all(&dir);
}
