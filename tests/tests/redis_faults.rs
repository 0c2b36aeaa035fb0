//! Replicas of one service against one real `redis-server`, under real faults: every fire runs
//! exactly once, a dead or frozen holder is replaced, and fencing tokens expose a frozen writer.
//! The scenarios run one at a time (they share two cores and measure recovery times).

use std::sync::Mutex;
use std::time::Duration;

use cronguard_testkit::RedisServer;
use cronguard_tests::replicas::{
    assert_each_fire_once, assert_no_gaps, now_ms, Replicas, Settings,
};
use cronguard_tests::{starts_per_fire, Entry};

const WORKER: &str = env!("CARGO_BIN_EXE_shared_worker");

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const FAST: Settings = Settings {
    lease_ms: 3000,
    grace_ms: 60_000,
    work_ms: 50,
    run_for_ms: 10_000,
};

#[test]
fn steady_state_runs_every_fire_exactly_once() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let record = Replicas::start(
        WORKER,
        "steady",
        &[("CRONGUARD_REDIS_URL", redis.url())],
        FAST,
        &[0, 0, 0, 0],
    )
    .finish(None);
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
}

#[test]
fn skewed_clocks_still_run_every_fire_exactly_once() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(redis) = RedisServer::start() else {
        return;
    };
    // A late replica wakes after the early one's fast run has released the lock: only the
    // stored last fire stops it from running the same fire again.
    let record = Replicas::start(
        WORKER,
        "skew",
        &[("CRONGUARD_REDIS_URL", redis.url())],
        FAST,
        &[-400, -150, 0, 200, 400],
    )
    .finish(None);
    assert_each_fire_once(&record);
    assert_no_gaps(&record);
}

#[test]
fn killing_the_holder_hands_the_job_to_another_replica_within_lease_plus_a_period() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let s = Settings {
        lease_ms: 2000,
        work_ms: 2500,
        run_for_ms: 12_000,
        ..FAST
    };
    let mut replicas = Replicas::start(
        WORKER,
        "kill",
        &[("CRONGUARD_REDIS_URL", redis.url())],
        s,
        &[0, 0, 0],
    );
    replicas.wait_for(Duration::from_secs(5), "a run", |r| {
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
    // The dead holder's key expires at most one lease after its last renewal; the next fire
    // after that claims it.
    assert!(
        gap <= 2000 + 1000 + 500,
        "the job resumed {gap} ms after the kill"
    );
    eprintln!("resumed {gap} ms after SIGKILL of the holder");
}

#[test]
/// A holder frozen (SIGSTOP) past its lease while its run sleeps: when it resumes, its job's own
/// timer is due before the watchdog notices, yet the run takes no further step — it is stopped
/// at its lease's local deadline and reported as `lease_lost`, never as succeeded.
fn a_frozen_holder_is_replaced_and_takes_no_step_after_its_lease() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let s = Settings {
        lease_ms: 1500,
        work_ms: 6000,
        run_for_ms: 14_000,
        ..FAST
    };
    let replicas = Replicas::start(
        WORKER,
        "freeze",
        &[("CRONGUARD_REDIS_URL", redis.url())],
        s,
        &[0, 0, 0],
    );
    replicas.wait_for(Duration::from_secs(5), "a write", |r| {
        r.iter().any(|e| e.what == "write")
    });
    let frozen = replicas.holder();
    Replicas::signal(frozen.pid, "-STOP");
    // Longer than the lease: the key expires and another replica takes a later fire.
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
    let newer = record
        .iter()
        // `<=`: the start seen before `cont_ms` was taken may carry the same millisecond.
        .filter(|e| e.what == "start" && e.pid != frozen.pid && e.at_ms <= cont_ms)
        .map(|e| e.token)
        .max()
        .expect("a newer holder");
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
    assert!(newer > frozen.token, "the newer holder's token is higher");
    assert!(
        !record
            .iter()
            .any(|e| e.what == "end" && e.fire_ms == frozen.fire_ms),
        "the frozen run was cancelled, not finished"
    );
    let cancelled = record
        .iter()
        .any(|e| e.what == "ev:cancelled" && e.pid == frozen.pid && e.fire_ms == frozen.fire_ms);
    assert!(cancelled, "the frozen run ends as cancelled");
    let ends: Vec<&str> = record
        .iter()
        .filter(|e| e.pid == frozen.pid && e.fire_ms == frozen.fire_ms && e.what.starts_with("ev:"))
        .map(|e| e.what.as_str())
        .collect();
    assert!(
        !ends.contains(&"ev:succeeded"),
        "the frozen run is not reported as succeeded: {ends:?}"
    );
}

fn outage(name: &str, fault: impl FnOnce(&mut RedisServer)) -> (Vec<Entry>, i64, i64) {
    let Some(mut redis) = RedisServer::start() else {
        return (Vec::new(), 0, 0);
    };
    let s = Settings {
        lease_ms: 1500,
        grace_ms: 1500,
        work_ms: 100,
        run_for_ms: 14_000,
    };
    let replicas = Replicas::start(
        WORKER,
        name,
        &[("CRONGUARD_REDIS_URL", redis.url())],
        s,
        &[0, 0, 0],
    );
    replicas.wait_for(Duration::from_secs(5), "three runs", |r| {
        starts_per_fire(r).len() >= 3
    });
    let from = now_ms();
    fault(&mut redis);
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
    assert!(
        record.iter().any(|e| e.what == "start" && e.at_ms > to),
        "the scheduler carried on"
    );
}

#[test]
fn a_frozen_redis_turns_fires_into_reported_misfires_and_the_scheduler_carries_on() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (record, from, to) = outage("redis-stop", |redis| {
        redis.pause();
        std::thread::sleep(Duration::from_millis(4000)); // the outage itself: longer than the lease
        redis.resume();
    });
    if record.is_empty() {
        return;
    }
    assert_outage_reported(&record, from, to);
}

#[test]
fn a_redis_restart_that_lost_its_data_keeps_fencing_tokens_rising() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (record, from, to) = outage("redis-restart", |redis| {
        redis.kill();
        std::thread::sleep(Duration::from_millis(3000)); // the outage itself
        redis.restart();
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

#[test]
fn a_claim_whose_reply_was_lost_in_a_redis_freeze_still_runs_its_fire() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let s = Settings {
        lease_ms: 3000,
        grace_ms: 60_000,
        work_ms: 50,
        run_for_ms: 12_000,
    };
    // One replica: a fire it sees "claimed elsewhere" can only be its own claim.
    let replicas = Replicas::start(
        WORKER,
        "lost-reply",
        &[("CRONGUARD_REDIS_URL", redis.url())],
        s,
        &[0],
    );
    replicas.wait_for(Duration::from_secs(5), "two runs", |r| {
        starts_per_fire(r).len() >= 2
    });
    let from = now_ms();
    // Longer than the 2 s response timeout plus a period: a claim sent during the freeze fails
    // on the client, and the server applies it when it runs again.
    redis.pause();
    std::thread::sleep(Duration::from_millis(3500));
    redis.resume();
    let to = now_ms();
    replicas.wait_for(Duration::from_secs(8), "runs after the freeze", |r| {
        r.iter().any(|e| e.what == "start" && e.at_ms > to + 500)
    });
    let record = replicas.finish(None);
    assert_each_fire_once(&record);
    let elsewhere: Vec<i64> = record
        .iter()
        .filter(|e| e.what == "ev:claimed_elsewhere")
        .map(|e| e.fire_ms)
        .collect();
    assert!(
        elsewhere.is_empty(),
        "the replica's own claims, whose replies were lost, were taken for another's: {elsewhere:?}"
    );
    assert!(
        record
            .iter()
            .any(|e| e.what == "start" && e.fire_ms >= from && e.fire_ms <= to),
        "the fire claimed during the freeze ran after it ({from}..{to})"
    );
}

#[test]
fn a_replica_whose_clock_is_an_hour_ahead_cannot_silence_the_others() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let ahead = Replicas::start(
        WORKER,
        "ahead",
        &[("CRONGUARD_REDIS_URL", redis.url())],
        FAST,
        &[0, 0, 3_600_000],
    );
    let ahead_pid = ahead.pid(2);
    let record = ahead.finish(None);
    assert_each_fire_once(&record);
    assert_no_gaps(&record);
    assert!(
        !record
            .iter()
            .any(|e| e.what == "start" && e.pid == ahead_pid),
        "the replica an hour ahead claimed nothing"
    );
}
