//! Every replica of a job down for a while — a deploy that stops them all, a crash — against real
//! stores (`redis-server`, PostgreSQL, a lock dir): when they start again, every fire of the gap
//! ran once or is reported missed at warn level once across the replicas, none runs twice and
//! none is named nowhere (docs/guide/downtime.md). The replicas are real processes, stopped with
//! SIGTERM (a graceful shutdown) or SIGKILL, and started again at the same instant.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use cronguard_testkit::{PostgresServer, RedisServer};
use cronguard_tests::replicas::{now_ms, Replicas, Settings};
use cronguard_tests::Entry;

const WORKER: &str = env!("CARGO_BIN_EXE_shared_worker");

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How the replicas go down, for how long, and what the job does with several fires due.
#[derive(Clone, Copy)]
struct Gap {
    /// Processes that run the job, before and after the gap.
    replicas: usize,
    signal: &'static str,
    down_ms: u64,
    grace_ms: u64,
    coalesce: bool,
}

/// What became of each fire, across the replicas.
#[derive(Debug, Default)]
struct Fates {
    starts: Vec<u32>,
    /// Replicas that reported the fire missed at warn level.
    missed_first: Vec<u32>,
    /// Replicas that reported it missed at debug level (another reported it first).
    missed_again: Vec<u32>,
    /// Replicas that reported it missed at warn level on their own word (the guard could not be
    /// asked, or could not record the fires): such a report may repeat another's
    /// (docs/design/guarantees.md).
    missed_own_word: Vec<u32>,
    /// Replicas that reported it skipped at warn level (it came due while a run went on).
    skipped_first: Vec<u32>,
    coalesced: usize,
}

fn fates(record: &[Entry]) -> BTreeMap<i64, Fates> {
    let mut map: BTreeMap<i64, Fates> = BTreeMap::new();
    for e in record {
        if e.what == "start" {
            map.entry(e.fire_ms).or_default().starts.push(e.pid);
        } else if e.what == "skipped:1" {
            map.entry(e.fire_ms).or_default().skipped_first.push(e.pid);
        } else if e.what == "ev:coalesced" {
            map.entry(e.fire_ms).or_default().coalesced += 1;
        } else if let Some(rest) = e.what.strip_prefix("missed:") {
            let mut fields = rest.split(':');
            let (Some(count), Some(first_report), Some(own_word)) =
                (fields.next(), fields.next(), fields.next())
            else {
                panic!("missed:<count>:<first>:<own word>, got {}", e.what);
            };
            let count: i64 = count.parse().expect("a count");
            let first = e.token as i64;
            assert_eq!(
                first + (count - 1) * 1000,
                e.fire_ms,
                "a misfire of {count} fires from {first} must end at {}",
                e.fire_ms
            );
            for k in 0..count {
                let f = map.entry(first + k * 1000).or_default();
                match (first_report, own_word) {
                    ("1", "1") => f.missed_own_word.push(e.pid),
                    ("1", _) => f.missed_first.push(e.pid),
                    _ => f.missed_again.push(e.pid),
                }
            }
        }
    }
    map
}

/// Runs `gap.replicas` replicas, stops all of them for `gap.down_ms`, starts as many again at the
/// same instant, and checks the fate of every fire from the first run to the last.
fn downtime(name: &str, env: &[(&str, String)], gap: Gap) {
    let s = Settings {
        lease_ms: 3000,
        grace_ms: gap.grace_ms,
        work_ms: 50,
        run_for_ms: 60_000,
    };
    let mut env: Vec<(&str, String)> = env.to_vec();
    if gap.coalesce {
        env.push(("COALESCE", "1".to_owned()));
    }
    let offsets = vec![0; gap.replicas];
    let mut replicas = Replicas::start(WORKER, name, &env, s, &offsets);
    replicas.wait_for(Duration::from_secs(20), "two runs before the stop", |r| {
        r.iter().filter(|e| e.what == "start").count() >= 2
    });
    let stopped_at = now_ms();
    replicas.stop_all(gap.signal);
    let last_before = replicas
        .record()
        .iter()
        .filter(|e| e.what == "start")
        .map(|e| e.fire_ms)
        .max()
        .expect("a run before the stop");
    // The downtime itself: no process runs the job meanwhile.
    std::thread::sleep(Duration::from_millis(gap.down_ms));
    let restarted_at = now_ms();
    replicas.add(WORKER, &env, s, &offsets);
    replicas.wait_for(
        Duration::from_secs(20),
        "a run of a fire after the restart",
        |r| {
            r.iter()
                .any(|e| e.what == "start" && e.fire_ms >= restarted_at + 1_000)
        },
    );
    // The walk's report of the missed fires, if any are past their grace, reaches the record.
    let gap_fires = (last_before + 1_000..restarted_at).step_by(1_000);
    let past_grace = gap_fires
        .clone()
        .filter(|f| f + (gap.grace_ms as i64) < restarted_at)
        .count();
    if past_grace > 0 {
        replicas.wait_for(Duration::from_secs(10), "the missed fires reported", |r| {
            r.iter().any(|e| e.what.starts_with("missed:"))
        });
    }
    replicas.stop_all("-TERM");
    let record = replicas.finish(None);
    let fates = fates(&record);
    let last_run = fates
        .iter()
        .filter(|(_, f)| !f.starts.is_empty())
        .map(|(t, _)| *t)
        .max()
        .expect("runs");
    let first_run = fates
        .iter()
        .find(|(_, f)| !f.starts.is_empty())
        .map(|(t, _)| *t)
        .expect("runs");
    let mut caught_up = 0;
    let mut reported = 0;
    for fire in (first_run..=last_run).step_by(1_000) {
        let f = fates.get(&fire);
        let (starts, first, own_word, coalesced) = f.map_or((0, 0, 0, 0), |f| {
            (
                f.starts.len(),
                f.missed_first.len() + f.skipped_first.len(),
                f.missed_own_word.len(),
                f.coalesced,
            )
        });
        assert!(starts <= 1, "fire {fire} ran {starts} times: {f:?}");
        assert!(
            first <= 1,
            "fire {fire} was reported at warn level by {first} replicas: {f:?}"
        );
        assert!(
            starts + first <= 1,
            "fire {fire} ran and was reported at warn level: {f:?}"
        );
        if starts == 1 && coalesced > 0 {
            panic!("fire {fire} ran and was coalesced: {f:?}");
        }
        let in_gap = fire > last_before && fire < restarted_at;
        // A fire due while the replicas stopped may die with a killed claimant (its claim
        // counts, its start was never written): it must still not run twice.
        let at_the_kill = gap.signal == "-KILL" && fire > stopped_at - 1_000 && fire <= stopped_at;
        if starts + first + own_word == 0 && coalesced == 0 && !at_the_kill {
            panic!(
                "fire {fire} neither ran nor was reported (stopped at {stopped_at}, started again at {restarted_at}): {f:?}\n{record:#?}"
            );
        }
        if in_gap {
            if starts == 1 {
                caught_up += 1;
            }
            // Reports on a process's own word may repeat the guard's: the fire counts once.
            reported += f.map_or(0, |f| {
                usize::from(f.missed_first.len() + f.missed_own_word.len() > 0)
            });
        }
    }
    assert_eq!(
        reported, past_grace,
        "the gap's fires past their grace are reported, each once"
    );
    if gap.coalesce {
        assert!(caught_up <= 1, "with coalesce one fire of the gap runs");
    }
    let within = gap_fires.count() - past_grace;
    if within > 0 {
        assert!(caught_up >= 1, "a fire of the gap within its grace runs");
    }
}

/// Two replicas stopped gracefully (a deploy) for longer than the grace: the fires past it are
/// reported, the ones within it run.
const DEPLOY_PAST_THE_GRACE: Gap = Gap {
    replicas: 2,
    signal: "-TERM",
    down_ms: 6_000,
    grace_ms: 2_000,
    coalesce: false,
};

/// Two replicas killed, with `coalesce`: of the fires within the grace one runs.
const KILLED_WITH_COALESCE: Gap = Gap {
    replicas: 2,
    signal: "-KILL",
    down_ms: 6_000,
    grace_ms: 3_500,
    coalesce: true,
};

/// Two replicas killed for less than the grace: every fire of the gap is caught up.
const KILLED_WITHIN_THE_GRACE: Gap = Gap {
    replicas: 2,
    signal: "-KILL",
    down_ms: 4_000,
    grace_ms: 20_000,
    coalesce: false,
};

fn redis_env(redis: &RedisServer) -> Vec<(&'static str, String)> {
    vec![("CRONGUARD_REDIS_URL", redis.url())]
}

fn pg_env(db: &PostgresServer) -> Vec<(&'static str, String)> {
    vec![
        ("LOCK", "postgres".to_owned()),
        ("CRONGUARD_POSTGRES_URL", db.url()),
    ]
}

/// A lock dir (`file`) or state dir (`local`) of its own, removed afterwards.
fn with_dir(name: &str, lock: &str, setting: &'static str, gap: Gap) {
    let dir = std::env::temp_dir().join(format!("cronguard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let env = vec![
        ("LOCK", lock.to_owned()),
        (setting, dir.display().to_string()),
    ];
    downtime(name, &env, gap);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_all_replicas_stopped_past_the_grace() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(redis) = RedisServer::start() {
        downtime("down-redis-term", &redis_env(&redis), DEPLOY_PAST_THE_GRACE);
    }
}

#[test]
fn redis_all_replicas_killed_with_coalesce() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(redis) = RedisServer::start() {
        downtime("down-redis-kill", &redis_env(&redis), KILLED_WITH_COALESCE);
    }
}

#[test]
fn redis_a_gap_within_the_grace_is_caught_up() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(redis) = RedisServer::start() {
        downtime(
            "down-redis-short",
            &redis_env(&redis),
            KILLED_WITHIN_THE_GRACE,
        );
    }
}

#[test]
fn postgres_all_replicas_stopped_past_the_grace() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(db) = PostgresServer::start() {
        downtime("down-pg-term", &pg_env(&db), DEPLOY_PAST_THE_GRACE);
    }
}

#[test]
fn postgres_all_replicas_killed_with_coalesce() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(db) = PostgresServer::start() {
        downtime("down-pg-kill", &pg_env(&db), KILLED_WITH_COALESCE);
    }
}

#[test]
fn file_all_processes_stopped_past_the_grace() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    with_dir(
        "down-file-term",
        "file",
        "CRONGUARD_LOCK_DIR",
        DEPLOY_PAST_THE_GRACE,
    );
}

#[test]
fn file_all_processes_killed_with_coalesce() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    with_dir(
        "down-file-kill",
        "file",
        "CRONGUARD_LOCK_DIR",
        KILLED_WITH_COALESCE,
    );
}

/// One process (a `local` job runs in each process) with a state dir, killed and started again.
#[test]
fn a_local_job_with_a_state_dir_killed_and_started_again() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let gap = Gap {
        replicas: 1,
        ..KILLED_WITH_COALESCE
    };
    with_dir("down-local-kill", "local", "CRONGUARD_STATE_DIR", gap);
}
