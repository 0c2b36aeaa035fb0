//! Partition ownership across real processes (docs/design/ownership.md): three replicas run 300
//! Redis-guarded jobs due every second with `Builder::partition_ownership`. Once the partitions
//! are spread, each fire is claimed by its owner only (the others send no claim that loses), and
//! every replica owns a share; after one replica is killed (SIGKILL, no hand-over), its
//! partitions are owned again and every fire of the gap ran once or was reported at warn level.
//! The same holds for an owner frozen (SIGSTOP) past its leases that wakes up, and for one whose
//! shard is held up by a job's blocking code.

use std::collections::BTreeSet;
use std::process::Child;
use std::time::Duration;

use cronguard_testkit::RedisServer;
use cronguard_tests::fleet::{self, now_ms, read, wait_running};

const WORKER: &str = env!("CARGO_BIN_EXE_fleet_worker");
const JOBS: u32 = 300;

/// Three replicas of `jobs` Redis jobs with partition ownership and a grace of 3 s, recording into
/// `dir`, each once it has run a fire.
fn three_running(redis: &RedisServer, dir: &std::path::Path, jobs: u32) -> Vec<Child> {
    let url = redis.url();
    let jobs = jobs.to_string();
    let env = [
        ("JOBS", jobs.as_str()),
        ("OWNERSHIP", "1"),
        ("GRACE_MS", "3000"),
        ("RUN_FOR_MS", "120000"),
    ];
    let replicas: Vec<Child> = (0..3)
        .map(|n| fleet::spawn(WORKER, dir, &url, n, &env))
        .collect();
    let begun = now_ms();
    for r in &replicas {
        wait_running(dir, r.id(), begun);
    }
    replicas
}

#[test]
fn owners_alone_claim_and_a_killed_owners_fires_run_once_or_are_reported() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let dir = fleet::scratch_dir("ownership");
    let mut replicas = three_running(&redis, &dir, JOBS);
    // The partitions spread over the three within a few reads of the feed (one a second).
    let settled = now_ms() + 4_000;
    let window_end = settled + 5_000;
    wait_running(&dir, replicas[0].id(), window_end + 1_000);
    let record = read(&dir.join("record"));
    let in_window = |fire: i64| fire >= settled && fire < window_end;
    let fires = record
        .starts
        .keys()
        .filter(|(_, fire)| in_window(*fire))
        .count();
    let lost = record.lost.iter().filter(|(_, f, _)| in_window(*f)).count();
    let pids: Vec<u32> = replicas.iter().map(Child::id).collect();
    let share: Vec<usize> = pids
        .iter()
        .map(|pid| {
            record
                .starts
                .iter()
                .filter(|((_, f), runs)| in_window(*f) && runs[0].0 == *pid)
                .count()
        })
        .collect();
    eprintln!("ownership, steady: {fires} fires ran, {lost} claims lost to another replica, runs per replica {share:?}");
    assert!(fires >= 4 * JOBS as usize, "{fires} fires in 5 s");
    // Without ownership each fire costs two claims that lose (the replicas standing by).
    assert!(
        lost * 100 <= fires,
        "{lost} claims lost for {fires} fires: the replicas that do not own a partition still claim its fires"
    );
    assert!(
        share.iter().all(|s| *s * 6 >= fires),
        "every replica owns a share: {share:?} of {fires}"
    );

    // Kill one replica just after an instant: it neither renews nor hands over its partitions.
    let killed = pids[0];
    let kill_instant = fleet::just_after_an_instant();
    fleet::signal(&mut replicas[0], "KILL");
    let killed_at = now_ms();
    let owned_by_killed: BTreeSet<u32> = record
        .starts
        .iter()
        .filter(|((_, f), runs)| in_window(*f) && runs[0].0 == killed)
        .map(|((job, _), _)| *job)
        .collect();
    let until = killed_at + 15_000;
    wait_running(&dir, pids[1], until);
    for r in &mut replicas[1..] {
        fleet::signal(r, "TERM");
    }
    let record = read(&dir.join("record"));

    let twice = record.started_twice();
    assert!(twice.is_empty(), "fires started more than once: {twice:?}");
    // The fire of the kill's instant may have been claimed by the killed replica and not started
    // (docs/design/guarantees.md): every later one ran or was reported.
    let gap = record.undecided(&owned_by_killed, kill_instant + 1_000, until - 2_000);
    let caught_late = record
        .starts
        .iter()
        .filter(|((job, fire), runs)| {
            owned_by_killed.contains(job)
                && (kill_instant + 1_000..=until - 2_000).contains(fire)
                && runs[0].1 - fire > 500
        })
        .count();
    // How long until every job of the killed replica ran a fire again.
    let handed_over = owned_by_killed
        .iter()
        .filter_map(|job| {
            record
                .starts
                .range((*job, kill_instant + 1_000)..(*job, i64::MAX))
                .next()
                .map(|(_, runs)| runs[0].1 - killed_at)
        })
        .max()
        .unwrap_or(-1);
    // How long until another replica decided a fire of each of the killed replica's jobs (ran
    // it, or reported it): its partitions were owned again. A run of the fire the killed replica
    // claimed holds the job's lock until its lease (`LEASE_MS`) runs out: the fires until then
    // are reported busy, and the runs resume after it.
    let decided_again =
        record.decided_elsewhere(&owned_by_killed, kill_instant + 1_000, killed, killed_at);
    let warned = record
        .warns
        .iter()
        .filter(|(_, _, last, _)| *last > kill_instant)
        .count();
    eprintln!(
        "ownership, kill -9: {} jobs of the killed replica; another replica decided a fire of every one within {decided_again} ms, and ran one within {handed_over} ms; {caught_late} fires started more than 500 ms late, {warned} warn-level reports after the kill",
        owned_by_killed.len()
    );
    assert!(
        gap.is_empty(),
        "{} fires of the killed replica's jobs neither ran nor were reported, e.g. {:?}; logs in {}",
        gap.len(),
        &gap[..gap.len().min(5)],
        dir.display()
    );
    assert!(!owned_by_killed.is_empty());
    let ran_yet_warned = record.warned_yet_started();
    assert!(
        ran_yet_warned.is_empty(),
        "fires that started were reported at warn level (job, first, last, pid): {ran_yet_warned:?}; logs in {}",
        dir.display()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An owner frozen (SIGSTOP, as a host suspended or a VM paused) past its partitions' lease: the
/// others own its partitions and walk the fires it left; when it wakes, with the fires due
/// meanwhile in its queues and its leases long gone, no fire starts twice, every fire of its
/// jobs ran or was reported, it takes a share again, and it raises no alarm for the fires it had
/// left to the other owners.
#[test]
fn a_frozen_owner_wakes_and_no_fire_of_its_partitions_runs_twice_or_vanishes() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let dir = fleet::scratch_dir("ownership-freeze");
    let mut replicas = three_running(&redis, &dir, 120u32);
    let pids: Vec<u32> = replicas.iter().map(Child::id).collect();
    let settled = now_ms() + 4_000;
    wait_running(&dir, pids[0], settled + 2_000);
    let record = read(&dir.join("record"));
    let frozen = pids[0];
    let owned_by_frozen: BTreeSet<u32> = record
        .starts
        .iter()
        .filter(|((_, f), runs)| *f >= settled && runs[0].0 == frozen)
        .map(|((job, _), _)| *job)
        .collect();
    let freeze_instant = fleet::just_after_an_instant();
    fleet::send(frozen, "STOP");
    let frozen_at = now_ms();
    // Frozen for 6 s: past the 3 s lease of its partitions and the 5 s lease of its runs.
    wait_running(&dir, pids[1], frozen_at + 6_000);
    fleet::send(frozen, "CONT");
    let woke_at = now_ms();
    // It takes part again: it owns partitions and runs their fires.
    wait_running(&dir, frozen, woke_at + 4_000);
    let until = woke_at + 8_000;
    wait_running(&dir, pids[1], until);
    for r in &mut replicas {
        fleet::signal(r, "TERM");
    }
    let record = read(&dir.join("record"));

    let twice = record.started_twice();
    assert!(twice.is_empty(), "fires started more than once: {twice:?}");
    let gap = record.undecided(&owned_by_frozen, freeze_instant + 1_000, until - 2_000);
    let decided_again =
        record.decided_elsewhere(&owned_by_frozen, freeze_instant + 1_000, frozen, frozen_at);
    let warned_after = record
        .warned_at
        .iter()
        .filter(|(_, pid, at)| *pid == frozen && *at >= woke_at)
        .count();
    let lost = record
        .lost
        .iter()
        .filter(|(_, f, pid)| *pid == frozen && *f > freeze_instant)
        .count();
    eprintln!(
        "ownership, a frozen owner: {} jobs of the frozen replica; another replica decided a fire of every one within {decided_again} ms of the freeze; after it woke, {lost} of its claims found the fire taken and it reported {warned_after} ranges at warn level; {} fires neither ran nor were reported",
        owned_by_frozen.len(),
        gap.len()
    );
    assert!(
        gap.is_empty(),
        "{} fires of the frozen replica's jobs neither ran nor were reported, e.g. {:?}; logs in {}",
        gap.len(),
        &gap[..gap.len().min(5)],
        dir.display()
    );
    assert!(!owned_by_frozen.is_empty());
    // No fire that ran anywhere is reported at warn level: the fires of its own partitions that
    // it slept through ran on the processes that took them over, and it records the range
    // through the guard, which answers that they had a fate; the fires it had left to the other
    // owners, which ran there, it does not even walk: it heard that those owners had renewed
    // before deciding anything (docs/design/ownership.md).
    let ran_yet_warned = record.warned_yet_started();
    assert!(
        ran_yet_warned.is_empty(),
        "fires that started were reported at warn level (job, first, last, pid): {ran_yet_warned:?}; logs in {}",
        dir.display()
    );
    // One warn-level report per fire: the fires the other replicas walked and reported, the woken
    // replica, which slept through them, asks the guard about and does not report again.
    let twice = record.warned_by_two(&owned_by_frozen, freeze_instant + 1_000, until - 2_000);
    assert!(
        twice.is_empty(),
        "fires reported at warn level by two processes ((job, fire), pids): {twice:?}; logs in {}",
        dir.display()
    );
    let not_its_own: Vec<u32> = record
        .warned_at
        .iter()
        .filter(|(job, pid, at)| *pid == frozen && *at >= woke_at && !owned_by_frozen.contains(job))
        .map(|(job, _, _)| *job)
        .collect();
    assert!(
        not_its_own.is_empty(),
        "after it woke, it reported fires of {} jobs that others owned and ran, e.g. {:?}; logs in {}",
        not_its_own.len(),
        &not_its_own[..not_its_own.len().min(5)],
        dir.display()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A job whose `async` code blocks its thread in one replica holds up that replica's shard (all of
/// its jobs, fewer than 1,024) while the replica's feed reader, on another thread, could go on
/// renewing its partitions: the others would leave those fires to it for ever. The replica must
/// leave its group once the shard has stalled for a second, so that every later fire of its
/// partitions' jobs runs elsewhere once or is reported (docs/design/ownership.md, "A stalled
/// shard"); nothing else wakes its runtime. Asked to stop, its shutdown goes on without the
/// shard and says so.
#[test]
fn a_replica_whose_shard_is_held_up_by_blocking_code_gives_its_partitions_up() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let dir = fleet::scratch_dir("ownership-stall");
    let url = redis.url();
    let jobs = 120u32;
    let jobs_env = jobs.to_string();
    let env = [
        ("JOBS", jobs_env.as_str()),
        ("OWNERSHIP", "1"),
        ("GRACE_MS", "3000"),
        ("RUN_FOR_MS", "120000"),
    ];
    let begun = now_ms();
    // The partitions spread within a few reads; the first run of replica 0 after that blocks.
    let block_at = (begun / 1_000 + 7) * 1_000;
    let block_env = block_at.to_string();
    let mut blocking_env = env.to_vec();
    blocking_env.push(("BLOCK_AT_MS", block_env.as_str()));
    let mut replicas: Vec<Child> = vec![fleet::spawn(WORKER, &dir, &url, 0, &blocking_env)];
    replicas.extend((1..3).map(|n| fleet::spawn(WORKER, &dir, &url, n, &env)));
    for r in &replicas {
        wait_running(&dir, r.id(), begun);
    }
    let pids: Vec<u32> = replicas.iter().map(Child::id).collect();
    wait_running(&dir, pids[1], block_at + 1_000);
    let record = read(&dir.join("record"));
    let &[(blocked_job, blocked_fire, blocker)] = record.blocks.as_slice() else {
        panic!(
            "one run blocks: {:?}; logs in {}",
            record.blocks,
            dir.display()
        );
    };
    assert_eq!(blocker, pids[0]);
    let owned_by_blocked: BTreeSet<u32> = record
        .starts
        .iter()
        .filter(|((_, f), runs)| {
            *f >= blocked_fire - 3_000 && *f <= blocked_fire && runs[0].0 == blocker
        })
        .map(|((job, _), _)| *job)
        .collect();
    let until = blocked_fire + 12_000;
    wait_running(&dir, pids[1], until);
    for r in &mut replicas[1..] {
        fleet::signal(r, "TERM");
    }
    // Its shard never runs again: its shutdown goes on without it and says so, and the process
    // cannot exit (tokio's runtime waits for the blocked thread when it is dropped).
    fleet::send(pids[0], "TERM");
    let log_path = dir.join("replica-0.log");
    let asked = std::time::Instant::now();
    let stopping_without = "stopping without a shard of this process that is still held up";
    while !std::fs::read_to_string(&log_path)
        .unwrap_or_default()
        .contains(stopping_without)
    {
        assert!(
            asked.elapsed() < Duration::from_secs(20),
            "the held-up replica did not shut down within 20 s of SIGTERM; logs in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    fleet::signal(&mut replicas[0], "KILL");
    let record = read(&dir.join("record"));

    let twice = record.started_twice();
    assert!(twice.is_empty(), "fires started more than once: {twice:?}");
    // The fires of the blocking instant that the held-up replica had claimed do not start, as
    // the claims of a process killed then (docs/design/guarantees.md): every later one ran or
    // was reported.
    let gap = record.undecided(&owned_by_blocked, blocked_fire + 1_000, until - 2_000);
    let decided_again = record.decided_elsewhere(
        &owned_by_blocked,
        blocked_fire + 1_000,
        blocker,
        blocked_fire,
    );
    eprintln!(
        "ownership, a shard held up: {} jobs of the held-up replica; another replica decided a fire of every one within {decided_again} ms of the blocking instant; {} fires neither ran nor were reported",
        owned_by_blocked.len(),
        gap.len()
    );
    assert!(
        gap.is_empty(),
        "{} fires of the held-up replica's jobs neither ran nor were reported, e.g. {:?}; logs in {}",
        gap.len(),
        &gap[..gap.len().min(5)],
        dir.display()
    );
    assert!(!owned_by_blocked.is_empty());
    let log = std::fs::read_to_string(dir.join("replica-0.log")).unwrap_or_default();
    assert!(
        log.contains("a shard of this process has not run for over a second")
            && log.contains(&format!(
                "the run of job `fleet_{blocked_job}` blocks its thread"
            )),
        "the held-up replica says why it left its group, and which job holds it up: {log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
