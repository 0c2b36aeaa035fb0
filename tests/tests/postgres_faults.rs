//! Replicas of one service against one real PostgreSQL server, under real faults: every fire runs
//! exactly once, a dead or frozen holder is replaced, a frozen or restarted database turns fires
//! into reported misfires and the job resumes, and the run history records what happened. The
//! scenarios run one at a time (they share two cores and measure recovery times).

use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use cronguard_testkit::PostgresServer;
use cronguard_tests::replicas::{
    assert_each_fire_once, assert_no_gaps, now_ms, Replicas, Settings,
};
use cronguard_tests::{starts_per_fire, Entry};

const WORKER: &str = env!("CARGO_BIN_EXE_shared_worker");

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What every replica of a scenario runs with: the `postgres` guard, with history.
fn pg_env(db: &PostgresServer) -> [(&'static str, String); 3] {
    [
        ("LOCK", "postgres".to_owned()),
        ("HISTORY", "1".to_owned()),
        ("CRONGUARD_POSTGRES_URL", db.url()),
    ]
}

const FAST: Settings = Settings {
    lease_ms: 3000,
    grace_ms: 60_000,
    work_ms: 50,
    run_for_ms: 10_000,
};

#[test]
fn steady_state_runs_every_fire_exactly_once_and_records_its_history() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(db) = PostgresServer::start() else {
        return;
    };
    let record =
        Replicas::start(WORKER, "steady", &pg_env(&db), FAST, &[-300, 0, 0, 300]).finish(None);
    assert_each_fire_once(&record);
    assert_no_gaps(&record);
    let others = record
        .iter()
        .filter(|e| e.what == "ev:claimed_elsewhere")
        .count();
    // Partition ownership: once the replicas know each other (a second or two), only the
    // partition's owner claims the job's fires, where every replica used to claim each of the ten
    // (docs/design/ownership.md).
    assert!(
        others < 3 * 8,
        "the replicas that do not own the job's partition still claim its fires: {others} claims lost"
    );
    // The history holds one succeeded row per run, with the token the run saw.
    let rows = history(&db);
    for (fire, pids) in starts_per_fire(&record) {
        let token = record
            .iter()
            .find(|e| e.what == "start" && e.fire_ms == fire)
            .map(|e| e.token);
        let matching: Vec<&(i64, String, Option<u64>)> =
            rows.iter().filter(|(f, ..)| *f == fire).collect();
        assert_eq!(matching.len(), 1, "fire {fire} ({pids:?}): {matching:?}");
        assert_eq!(matching[0].2, token, "fire {fire}");
        let ended = record
            .iter()
            .any(|e| e.what == "ev:succeeded" && e.fire_ms == fire);
        if ended {
            assert_eq!(matching[0].1, "succeeded", "fire {fire}");
        }
    }
}

/// `(fire ms, outcome, fence)` of every history row of the fault job.
fn history(db: &PostgresServer) -> Vec<(i64, String, Option<u64>)> {
    let out = Command::new("psql")
        .args([
            &db.url(),
            "-At",
            "-F",
            " ",
            "-c",
            "SELECT (extract(epoch FROM fire) * 1000)::bigint, outcome, coalesce(fence, 0) \
             FROM cronguard.runs WHERE job = 'fault_job' ORDER BY fire, id",
        ])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            let fire = f.next()?.parse().ok()?;
            let outcome = f.next()?.to_owned();
            let fence: u64 = f.next()?.parse().ok()?;
            Some((fire, outcome, (fence != 0).then_some(fence)))
        })
        .collect()
}

#[test]
fn killing_the_holder_hands_the_job_to_another_replica_within_lease_plus_a_period() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(db) = PostgresServer::start() else {
        return;
    };
    let s = Settings {
        lease_ms: 2000,
        work_ms: 2500,
        run_for_ms: 12_000,
        ..FAST
    };
    let mut replicas = Replicas::start(WORKER, "kill", &pg_env(&db), s, &[0, 0, 0]);
    replicas.wait_for(Duration::from_secs(8), "a run", |r| {
        r.iter().any(|e| e.what == "start")
    });
    let holder = replicas.holder();
    replicas.child(holder.pid).kill().expect("SIGKILL");
    let killed_ms = now_ms();
    replicas.wait_for(Duration::from_secs(6), "a run after the kill", |r| {
        r.iter()
            .any(|e| e.what == "start" && e.fire_ms > holder.fire_ms)
    });
    let record = replicas.finish(Some(holder.pid));
    assert_each_fire_once(&record);
    let next = record
        .iter()
        .find(|e| e.what == "start" && e.fire_ms > holder.fire_ms)
        .expect("a later run");
    assert_ne!(next.pid, holder.pid);
    let gap = next.at_ms - killed_ms;
    assert!(
        gap <= 2000 + 1000 + 500,
        "the job resumed {gap} ms after the kill"
    );
    eprintln!("resumed {gap} ms after SIGKILL of the holder");
    let lost = history(&db)
        .into_iter()
        .find(|(fire, ..)| *fire == holder.fire_ms)
        .expect("the killed run's row");
    assert_eq!(lost.1, "lost", "the killed run is recorded as lost");
}

#[test]
/// A holder frozen (SIGSTOP) past its lease: another replica takes the job, and the frozen run
/// takes no step after its lease when it resumes.
fn a_frozen_holder_is_replaced_and_takes_no_step_after_its_lease() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(db) = PostgresServer::start() else {
        return;
    };
    let s = Settings {
        lease_ms: 1500,
        work_ms: 6000,
        run_for_ms: 14_000,
        ..FAST
    };
    let replicas = Replicas::start(WORKER, "freeze", &pg_env(&db), s, &[0, 0, 0]);
    replicas.wait_for(Duration::from_secs(8), "a write", |r| {
        r.iter().any(|e| e.what == "write")
    });
    let frozen = replicas.holder();
    Replicas::signal(frozen.pid, "-STOP");
    replicas.wait_for(Duration::from_secs(6), "another holder", |r| {
        r.iter()
            .any(|e| e.what == "start" && e.pid != frozen.pid && e.fire_ms > frozen.fire_ms)
    });
    let cont_ms = now_ms();
    Replicas::signal(frozen.pid, "-CONT");
    replicas.wait_for(Duration::from_secs(5), "the frozen run's lease_lost", |r| {
        r.iter()
            .any(|e| e.what == "ev:lease_lost" && e.pid == frozen.pid)
    });
    let record = replicas.finish(None);
    assert_each_fire_once(&record);
    let late_writes: Vec<&Entry> = record
        .iter()
        .filter(|e| {
            e.what == "write"
                && e.pid == frozen.pid
                && e.fire_ms == frozen.fire_ms
                && e.at_ms >= cont_ms
        })
        .collect();
    assert!(
        late_writes.is_empty(),
        "the frozen run wrote after it resumed, although its lease had run out: {late_writes:?}"
    );
    let newer = record
        .iter()
        .filter(|e| e.what == "start" && e.pid != frozen.pid && e.at_ms <= cont_ms)
        .map(|e| e.token)
        .max()
        .expect("a newer holder");
    assert!(newer > frozen.token, "the newer holder's token is higher");
}

fn outage(name: &str, fault: impl FnOnce(&mut PostgresServer)) -> (Vec<Entry>, i64, i64) {
    let Some(mut db) = PostgresServer::start() else {
        return (Vec::new(), 0, 0);
    };
    let s = Settings {
        lease_ms: 1500,
        grace_ms: 1500,
        work_ms: 100,
        run_for_ms: 16_000,
    };
    let replicas = Replicas::start(WORKER, name, &pg_env(&db), s, &[0, 0, 0]);
    replicas.wait_for(Duration::from_secs(8), "three runs", |r| {
        starts_per_fire(r).len() >= 3
    });
    let from = now_ms();
    fault(&mut db);
    let to = now_ms();
    replicas.wait_for(Duration::from_secs(8), "runs after the outage", |r| {
        r.iter().any(|e| e.what == "start" && e.at_ms > to + 500)
    });
    let record = replicas.finish(None);
    (record, from, to)
}

fn assert_outage_reported(record: &[Entry], from: i64, to: i64) {
    assert_each_fire_once(record);
    let misfired: Vec<i64> = record
        .iter()
        .filter(|e| e.what == "ev:misfired")
        .map(|e| e.fire_ms)
        .collect();
    let in_outage = misfired.iter().filter(|t| **t >= from && **t <= to).count();
    assert!(
        in_outage >= 2,
        "fires during the outage are reported as misfired: {misfired:?} ({from}..{to})"
    );
    // Every fire from the first run to the last is accounted for: run, or reported.
    let fires: Vec<i64> = starts_per_fire(record).keys().copied().collect();
    let (first, last) = (fires[0], fires[fires.len() - 1]);
    let mut fire = first;
    while fire <= last {
        let ran = fires.contains(&fire);
        let reported = record
            .iter()
            .any(|e| e.fire_ms == fire && matches!(e.what.as_str(), "ev:misfired" | "ev:skipped"))
            || record
                .iter()
                .any(|e| e.what == "ev:misfired" && e.token as i64 <= fire && fire <= e.fire_ms);
        assert!(ran || reported, "fire {fire} neither ran nor was reported");
        fire += 1000;
    }
}

#[test]
fn a_frozen_database_turns_fires_into_reported_misfires_and_the_job_resumes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (record, from, to) = outage("pg-stop", |db| {
        db.pause();
        std::thread::sleep(Duration::from_millis(4000)); // the outage itself: longer than the lease
        db.resume();
    });
    if record.is_empty() {
        return;
    }
    assert_outage_reported(&record, from, to);
}

#[test]
fn a_database_restart_keeps_every_fire_once_and_fencing_tokens_rising() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (record, from, to) = outage("pg-restart", |db| {
        db.kill();
        std::thread::sleep(Duration::from_millis(3000)); // the outage itself
        db.restart();
    });
    if record.is_empty() {
        return;
    }
    assert_outage_reported(&record, from, to);
    let before = record
        .iter()
        .filter(|e| e.what == "start" && e.at_ms < from)
        .map(|e| e.token)
        .max()
        .expect("runs before");
    let after = record
        .iter()
        .filter(|e| e.what == "start" && e.at_ms > to)
        .map(|e| e.token)
        .min()
        .expect("runs after");
    assert!(
        after > before,
        "fencing tokens after the restart ({after}) exceed those before ({before})"
    );
}
