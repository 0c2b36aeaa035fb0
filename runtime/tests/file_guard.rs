//! The `file` guard between schedulers that share a lock dir, on tokio's paused clock: one run
//! per fire even when their clocks disagree, and a busy job is reported as skipped once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronguard::{Clock, Cronguard, Event, Job, Lock, Schedule};

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("valid")
        .with_timezone(&Utc)
}

fn lock_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cronguard-fg-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

async fn replica(
    dir: &std::path::Path,
    offset_ms: i64,
    work: Duration,
    events: &Arc<Mutex<Vec<Event>>>,
) -> Cronguard {
    let job = Job::new(
        "shared",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::File);
    replica_of(dir, offset_ms, work, events, job).await
}

async fn replica_of(
    dir: &std::path::Path,
    offset_ms: i64,
    work: Duration,
    events: &Arc<Mutex<Vec<Event>>>,
    job: Job,
) -> Cronguard {
    let sink = Arc::clone(events);
    let job = job.run(move |_| async move { tokio::time::sleep(work).await });
    cronguard::builder()
        .registered_jobs(false)
        .lock_dir(dir)
        .instance(format!("replica{offset_ms}"))
        .clock(Clock::anchored(t0()).with_offset(TimeDelta::milliseconds(offset_ms)))
        .on_event(move |e| sink.lock().expect("lock").push(e.clone()))
        .job(job)
        .start()
        .await
        .expect("starts")
}

#[tokio::test(start_paused = true)]
async fn replicas_with_skewed_clocks_run_each_fire_once() {
    let dir = lock_dir("skew");
    let events = Arc::new(Mutex::new(Vec::new()));
    // The fast run (10 ms) is over long before the late replicas wake.
    let a = replica(&dir, 0, Duration::from_millis(10), &events).await;
    let b = replica(&dir, -300, Duration::from_millis(10), &events).await;
    let c = replica(&dir, -400, Duration::from_millis(10), &events).await;
    // Past the standby of fire 5 in the replicas that did not get it (half the second between
    // two fires, on clocks up to 400 ms behind).
    tokio::time::sleep(Duration::from_millis(6_000)).await;
    for h in [a, b, c] {
        h.shutdown().await;
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    let events = events.lock().expect("lock").clone();
    for second in 1..=5 {
        let fire = t0() + TimeDelta::seconds(second);
        let of = |kind: &str| {
            events
                .iter()
                .filter(|e| e.fire_time == fire && e.kind.name() == kind)
                .count()
        };
        assert_eq!(of("started"), 1, "fire {second}: {events:#?}");
        assert_eq!(of("claimed_elsewhere"), 2, "fire {second}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Three replicas start one after another with 60 shared jobs: the first up claims every job
/// alone at first, yet once each has heard who is present (docs/design/standby.md) every job is
/// claimed at its instant by the one replica named first for it, so the jobs spread over the three
/// and stay where they are.
#[tokio::test(start_paused = true)]
async fn shared_jobs_spread_over_the_replicas_present() {
    let dir = lock_dir("spread");
    let events = Arc::new(Mutex::new(Vec::new()));
    // A clock anchored now reads `t0 + offset`.
    let start = |name: &'static str, offset_ms: i64| {
        let (dir, events) = (dir.clone(), Arc::clone(&events));
        async move {
            let sink = Arc::clone(&events);
            let mut builder = cronguard::builder()
                .registered_jobs(false)
                .lock_dir(&dir)
                .instance(name)
                .clock(Clock::anchored(t0()).with_offset(TimeDelta::milliseconds(offset_ms)))
                .on_event(move |e| sink.lock().expect("lock").push(e.clone()));
            for i in 0..60 {
                builder = builder.job(
                    Job::new(
                        format!("job-{i}"),
                        Schedule::every(Duration::from_secs(2)).expect("valid"),
                    )
                    .lock(Lock::File)
                    .run(|_| async {}),
                );
            }
            builder.start().await.expect("starts")
        }
    };
    let a = start("a", 0).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    // Their clocks a few milliseconds behind the first's.
    let b = start("b", 2_495).await;
    let c = start("c", 2_490).await;
    tokio::time::sleep(Duration::from_millis(12_000)).await;
    for h in [a, b, c] {
        h.shutdown().await;
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    let events = events.lock().expect("lock").clone();
    let runs_of = |fire: DateTime<Utc>| {
        let mut runs: Vec<(String, String)> = events
            .iter()
            .filter(|e| e.fire_time == fire && e.kind.name() == "started")
            .map(|e| (e.job.to_string(), e.instance.to_string()))
            .collect();
        runs.sort();
        runs
    };
    let early = runs_of(t0() + TimeDelta::seconds(2));
    assert!(
        early.iter().all(|(_, who)| who == "a"),
        "alone at first: {early:?}"
    );
    // From the fifth second on every replica has heard the others (they attend every second).
    let settled = runs_of(t0() + TimeDelta::seconds(8));
    assert_eq!(settled.len(), 60, "each job ran once: {settled:?}");
    // A third each on average; the ids are random, so a share is binomial (60, 1/3): 6 to 36
    // is over 4 standard deviations either side.
    for who in ["a", "b", "c"] {
        let mine = settled.iter().filter(|(_, w)| w == who).count();
        assert!(
            (6..=36).contains(&mine),
            "{who} ran {mine} of 60: {settled:?}"
        );
    }
    for second in [10, 12] {
        assert_eq!(
            runs_of(t0() + TimeDelta::seconds(second)),
            settled,
            "the jobs stay where they are"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// With `overlap = "queue"` a busy fire waits instead of being dropped, so the busy answer must
/// not use up the fire's report: when it misfires, exactly one replica reports it at warn level.
#[tokio::test(start_paused = true)]
async fn a_queued_fire_that_misfires_is_reported_at_warn_level_once_across_replicas() {
    let dir = lock_dir("queue-misfire");
    let events = Arc::new(Mutex::new(Vec::new()));
    let job = || {
        Job::new(
            "queued",
            Schedule::every(Duration::from_secs(2)).expect("valid"),
        )
        .lock(Lock::File)
        .overlap(cronguard::Overlap::Queue)
        .misfire_grace(Duration::from_secs(1))
    };
    // Runs take 5 s: the fires after the first wait for its run and misfire in both replicas.
    let a = replica_of(&dir, 0, Duration::from_secs(5), &events, job()).await;
    let b = replica_of(&dir, -50, Duration::from_secs(5), &events, job()).await;
    tokio::time::sleep(Duration::from_millis(6_900)).await;
    a.shutdown_within(Duration::ZERO).await;
    b.shutdown_within(Duration::ZERO).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    let events = events.lock().expect("lock").clone();
    let mut misfired: Vec<_> = events
        .iter()
        .filter(|e| e.kind.name() == "misfired")
        .map(|e| e.fire_time)
        .collect();
    misfired.dedup();
    assert!(misfired.len() >= 2, "{events:#?}");
    for fire in misfired {
        let warned = events
            .iter()
            .filter(|e| e.fire_time == fire && e.kind.name() == "misfired" && e.first_report)
            .count();
        assert_eq!(
            warned, 1,
            "fire {fire}: one replica reports the misfire at warn level: {events:#?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(start_paused = true)]
async fn a_busy_job_is_reported_as_skipped_once_across_replicas() {
    let dir = lock_dir("busy");
    let events = Arc::new(Mutex::new(Vec::new()));
    // Both replicas claim every fire at its instant (no standby), whichever of them is named
    // first for the job, so both hear that it is busy (a claim after a standby is the next
    // test's).
    let job = || {
        Job::new(
            "shared",
            Schedule::every(Duration::from_secs(1)).expect("valid"),
        )
        .lock(Lock::File)
        .standby(Duration::ZERO)
    };
    // Runs take 2.5 s: fires 2 and 3 find fire 1's run still holding the lock.
    let work = Duration::from_millis(2500);
    let a = replica_of(&dir, 0, work, &events, job()).await;
    let b = replica_of(&dir, -50, work, &events, job()).await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    a.shutdown().await;
    b.shutdown().await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    let events = events.lock().expect("lock").clone();
    let fire2 = t0() + TimeDelta::seconds(2);
    let skips: Vec<_> = events
        .iter()
        .filter(|e| e.fire_time == fire2 && e.kind.name() == "skipped")
        .collect();
    assert_eq!(skips.len(), 2, "each replica records the skip: {events:#?}");
    assert_eq!(
        skips.iter().filter(|e| e.first_report).count(),
        1,
        "but only one reports it first"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(start_paused = true)]
async fn a_fire_skipped_as_busy_is_not_run_by_a_replica_standing_by() {
    let dir = lock_dir("decided");
    let events = Arc::new(Mutex::new(Vec::new()));
    let job = || {
        Job::new(
            "decided",
            Schedule::every(Duration::from_secs(2)).expect("valid"),
        )
        .lock(Lock::File)
        .standby(Duration::from_secs(1))
    };
    // Each run outlasts the next fire's instant but not its standby: the replica that claims at
    // the instant finds the job busy and reports the fire as skipped; the other claims it a
    // second later, when the run has ended, and must hear that the fire was dropped.
    let work = Duration::from_millis(2500);
    let a = replica_of(&dir, 0, work, &events, job()).await;
    let b = replica_of(&dir, -50, work, &events, job()).await;
    tokio::time::sleep(Duration::from_secs(16)).await;
    a.shutdown().await;
    b.shutdown().await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    let events = events.lock().expect("lock").clone();
    let skipped_first: Vec<DateTime<Utc>> = events
        .iter()
        .filter(|e| e.kind.name() == "skipped" && e.first_report)
        .map(|e| e.fire_time)
        .collect();
    for e in events.iter().filter(|e| e.kind.name() == "started") {
        assert!(
            !skipped_first.contains(&e.fire_time),
            "fire {} was reported as skipped and then ran: {events:#?}",
            e.fire_time
        );
    }
    // The case above did happen: a replica claimed a skipped fire after its standby.
    let late = events.iter().any(|e| {
        e.kind.name() == "skipped" && !e.first_report && e.at >= e.fire_time + TimeDelta::seconds(1)
    });
    assert!(
        late,
        "no replica claimed a skipped fire after its standby: {events:#?}"
    );
    assert!(
        events.iter().filter(|e| e.kind.name() == "started").count() >= 3,
        "the job ran: {events:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Lock dirs that another local user could tamper with are refused at start.
/// A process stuck while it holds `<job>.state` (frozen, or `flock <lock dir>/<job>.state sleep
/// 1000`): the job's claims time out instead of hanging, and its fire is reported as misfired,
/// saying what to look for, once its grace is over. On the real clock: the guard waits for the
/// state lock on a blocking thread.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_holder_of_the_state_file_gets_fires_reported_as_misfired() {
    use fs2::FileExt;
    use std::os::unix::fs::DirBuilderExt;

    let dir = lock_dir("stuck");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .expect("lock dir");
    let state = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join("stuck.state"))
        .expect("state file");
    state.lock_exclusive().expect("state lock");
    let events = Arc::new(Mutex::new(Vec::<Event>::new()));
    let sink = Arc::clone(&events);
    let job = Job::new(
        "stuck",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::File)
    .misfire_grace(Duration::from_secs(2))
    .run(|_| async {});
    let handle = cronguard::builder()
        .registered_jobs(false)
        .lock_dir(&dir)
        .on_event(move |e| sink.lock().expect("lock").push(e.clone()))
        .job(job)
        .start()
        .await
        .expect("starts");
    let misfired = |events: &[Event]| {
        events.iter().find_map(|e| match &e.kind {
            cronguard::EventKind::Misfired { reason, .. } => Some(reason.clone()),
            _ => None,
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let reason = loop {
        if let Some(reason) = misfired(&events.lock().expect("lock")) {
            break Some(reason);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    drop(state);
    handle.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    let reason = reason.expect("a fire is reported as misfired within 30 s");
    assert!(
        reason.contains("stuck.state") && reason.contains("fuser"),
        "{reason}"
    );
    let ran = events
        .lock()
        .expect("lock")
        .iter()
        .filter(|e| e.kind.name() == "started")
        .count();
    assert_eq!(ran, 0, "no fire started while the state lock was stuck");
}

#[cfg(unix)]
mod private_lock_dir {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use cronguard::{Job, Lock, Schedule};

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("cronguard-priv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        dir
    }

    fn euid() -> u32 {
        nix::unistd::Uid::effective().as_raw()
    }

    /// The start error for a `file` job with lock dir `dir`, or `None` when it started.
    async fn start_error(dir: &Path) -> Option<String> {
        let started = cronguard::builder()
            .registered_jobs(false)
            .lock_dir(dir)
            .job(
                Job::new(
                    "f",
                    Schedule::every(Duration::from_secs(3600)).expect("valid"),
                )
                .lock(Lock::File)
                .run(|_| async {}),
            )
            .start()
            .await;
        match started {
            Ok(handle) => {
                handle.shutdown().await;
                None
            }
            Err(e) => Some(e.to_string()),
        }
    }

    #[tokio::test]
    async fn a_missing_lock_dir_is_created_private() {
        let base = scratch("create");
        let dir = base.join("a").join("b");
        assert_eq!(start_error(&dir).await, None);
        for d in [base.join("a"), dir] {
            let meta = std::fs::symlink_metadata(&d).expect("created");
            assert!(meta.is_dir());
            assert_eq!(meta.permissions().mode() & 0o777, 0o700, "{}", d.display());
            assert_eq!(meta.uid(), euid());
        }
        let _ = std::fs::remove_dir_all(&base);
    }

    #[tokio::test]
    async fn a_symlinked_lock_dir_is_refused() {
        let base = scratch("symlink");
        let real = base.join("real");
        std::fs::create_dir(&real).expect("dir");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let link = base.join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let err = start_error(&link).await.expect("refused");
        assert!(err.contains("symbolic link"), "{err}");
        assert!(err.contains("CRONGUARD_LOCK_DIR"), "{err}");
        assert_eq!(
            std::fs::read_dir(&real).expect("read").count(),
            0,
            "nothing was created through the link"
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[tokio::test]
    async fn a_lock_dir_writable_by_others_is_refused() {
        let base = scratch("writable");
        for mode in [0o777, 0o770, 0o1777] {
            let dir = base.join(format!("{mode:o}"));
            std::fs::create_dir(&dir).expect("dir");
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let err = start_error(&dir).await.expect("refused");
            assert!(err.contains("writable by"), "{mode:o}: {err}");
            assert!(err.contains("chmod go-w"), "{mode:o}: {err}");
        }
        let ok = base.join("755");
        std::fs::create_dir(&ok).expect("dir");
        std::fs::set_permissions(&ok, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(start_error(&ok).await, None, "readable by others is fine");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[tokio::test]
    async fn a_lock_dir_of_another_user_is_refused() {
        let base = scratch("owner");
        let dir = if euid() == 0 {
            let dir = base.join("nobody");
            std::fs::create_dir(&dir).expect("dir");
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
            std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).expect("chown");
            dir
        } else {
            // Owned by root and not writable by this user.
            PathBuf::from("/")
        };
        let err = start_error(&dir).await.expect("refused");
        assert!(err.contains("belongs to uid"), "{err}");
        let _ = std::fs::remove_dir_all(&base);
    }

    /// In a world-writable folder such as `/tmp`, another user can plant a link where a folder
    /// of the lock dir's path will be created.
    #[tokio::test]
    async fn a_planted_link_on_the_way_to_the_lock_dir_is_refused() {
        if euid() != 0 {
            return; // planting a link owned by another user needs root
        }
        let base = scratch("planted");
        let target = base.join("target");
        std::fs::create_dir(&target).expect("dir");
        let planted = base.join("planted");
        std::os::unix::fs::symlink(&target, &planted).expect("symlink");
        std::os::unix::fs::lchown(&planted, Some(65534), Some(65534)).expect("lchown");
        let err = start_error(&planted.join("locks")).await.expect("refused");
        assert!(err.contains("symbolic link"), "{err}");
        assert!(
            !target.join("locks").exists(),
            "nothing was created through the link"
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
