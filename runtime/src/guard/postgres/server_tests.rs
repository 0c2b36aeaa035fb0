//! The `postgres` guard against a real server: the conformance suite, and what only a database
//! can show — a frozen server, a restart, a fire recorded far ahead, a table that is not ours,
//! the run history.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronguard_testkit::{PgBouncer, PostgresServer};

use super::{Database, PostgresGuard};
use crate::guard::{Claim, DropReport, Guard, GuardControls, GuardErrorKind};
use crate::history::Outcome;
use crate::options::Overlap;

async fn database(server: &PostgresServer) -> Arc<Database> {
    Arc::new(
        Database::connect(&server.url(), "cronguard")
            .await
            .expect("connects and creates the schema"),
    )
}

fn guard(db: &Arc<Database>, job: &str, lease_ms: u64, history: bool) -> PostgresGuard {
    PostgresGuard::new(
        Arc::clone(db),
        job,
        Arc::from("test"),
        Duration::from_millis(lease_ms),
        Overlap::Skip,
        history,
    )
}

fn now() -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(Utc::now().timestamp_millis()).expect("in range")
}

async fn client(server: &PostgresServer) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(conn);
    client
}

#[tokio::test]
async fn postgres_guard_passes_the_conformance_suite() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let report = crate::guard::conformance::check(|spec| {
        Arc::new(
            PostgresGuard::new(
                Arc::clone(&db),
                &spec.job,
                Arc::from(spec.instance.as_str()),
                spec.lease,
                spec.overlap,
                spec.history,
            )
            .with_misfire_grace(spec.misfire_grace),
        )
    })
    .await
    .unwrap_or_else(|failure| panic!("{failure}"));
    assert!(report.skipped.is_empty(), "{report}");
}

#[tokio::test]
async fn a_manual_run_an_earlier_version_claimed_is_not_claimed_again() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let raw = client(&server).await;
    // A binary of an earlier version claims through claim_manual_v1, which keeps the last
    // eight runs in manual_ids/manual_tokens.
    let row = raw
        .query_one(
            "SELECT answer, val FROM cronguard.claim_manual_v1('older-manual', \
             '000000000000beef', 'old-nonce:manual:000000000000beef', 30000, now(), 'old', false)",
            &[],
        )
        .await
        .expect("claim_manual_v1 still answers");
    assert_eq!(row.get::<_, i32>(0), 2, "acquired by the earlier version");
    raw.batch_execute(
        "SELECT cronguard.release_v1('older-manual', 'old-nonce:manual:000000000000beef')",
    )
    .await
    .expect("released");
    let g = guard(&db, "older-manual", 30_000, false);
    let run = crate::control::ManualRun {
        id: 0xbeef,
        requested_at: now(),
    };
    let answer = g.claim_manual(run).await.expect("answers");
    assert!(matches!(answer, Claim::AlreadyRan), "{answer:?}");
}

#[tokio::test]
async fn a_claim_in_flight_while_the_database_froze_is_recognised_on_retry() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let g = guard(&db, "frozen", 30_000, false);
    let fire = now();
    server.pause();
    // Longer than the 2 s statement limit: the claim fails here and the server applies it when
    // it runs again.
    let (first, ()) = tokio::join!(g.claim(fire), async {
        tokio::time::sleep(Duration::from_millis(2_600)).await;
        server.resume();
    });
    assert!(first.is_err(), "the claim timed out: {first:?}");
    let mut retried = None;
    for _ in 0..100 {
        match g.claim(fire).await {
            Ok(claim) => {
                retried = Some(claim);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let other = guard(&db, "frozen", 30_000, false);
    match retried.expect("the guard answers again after the freeze") {
        Claim::Acquired(lease) => {
            assert!(
                matches!(
                    other.claim(fire).await.expect("answers"),
                    Claim::ClaimedByAnother
                ),
                "claimed once"
            );
            lease.release().await.expect("release");
        }
        other => panic!("the retry of a claim that took effect answered {other:?}"),
    }
}

#[tokio::test]
async fn claims_survive_a_database_restart_and_tokens_keep_rising() {
    let Some(mut server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let g = guard(&db, "restart", 30_000, false);
    let fire = now() - TimeDelta::seconds(1);
    let lease = match g.claim(fire).await.expect("answers") {
        Claim::Acquired(lease) => lease,
        other => panic!("{other:?}"),
    };
    let before = lease.fencing_token();
    lease.release().await.expect("release");
    server.restart();
    let other = guard(&db, "restart", 30_000, false);
    let mut answered = None;
    for _ in 0..200 {
        match other.claim(fire).await {
            Ok(claim) => {
                answered = Some(claim);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    assert!(
        matches!(answered, Some(Claim::ClaimedByAnother)),
        "the claim survived the restart: {answered:?}"
    );
    match other.claim(now()).await.expect("answers") {
        Claim::Acquired(lease) => {
            assert!(lease.fencing_token() > before);
            lease.release().await.expect("release");
        }
        claim => panic!("{claim:?}"),
    }
}

/// With eight claims made, the recent claims hold every claim ever made: a fire older than all
/// of them was never claimed, and is passed over (as the Redis guard answers), not taken as run.
#[tokio::test]
async fn eight_claims_are_all_the_claims_as_for_redis() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let g = guard(&db, "eight", 30_000, false);
    let base = now() - TimeDelta::seconds(60);
    let at = |s: i64| base + TimeDelta::seconds(s);
    for i in 2..10 {
        match g.claim(at(i)).await.expect("answers") {
            Claim::Acquired(lease) => lease.release().await.expect("release"),
            other => panic!("fire {i}: {other:?}"),
        }
    }
    let late = guard(&db, "eight", 30_000, false);
    assert!(
        matches!(late.claim(at(1)).await.expect("answers"), Claim::Superseded),
        "a fire before the eight claims ever made was passed over"
    );
    match g.claim(at(10)).await.expect("answers") {
        Claim::Acquired(lease) => lease.release().await.expect("release"),
        other => panic!("fire 10: {other:?}"),
    }
    assert!(
        matches!(late.claim(at(1)).await.expect("answers"), Claim::AlreadyRan),
        "with nine claims made, a fire older than the eight remembered is past"
    );
}

/// The database's clock set back (an NTP step, a failover to a server whose clock is behind):
/// the last claim lies far ahead of it. A fire the recent claims remember is not claimed again,
/// and `last_fire` does not move back.
#[tokio::test]
async fn a_claimed_fire_is_not_claimed_again_after_the_database_clock_went_back() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let raw = client(&server).await;
    let base = now() - TimeDelta::seconds(60);
    let at = |s: i64| base + TimeDelta::seconds(s);
    let fires: Vec<DateTime<Utc>> = (2..10).map(at).collect();
    let tokens: Vec<String> = (2..10).map(|i| format!("other:{i}")).collect();
    raw.execute(
        "INSERT INTO cronguard.jobs (job, last_fire, holder, fence, recent_fires, recent_tokens) \
         VALUES ('stepped', now() + interval '1 hour', 'other:ahead', 100, $1, $2)",
        &[&fires, &tokens],
    )
    .await
    .expect("insert");
    let g = guard(&db, "stepped", 30_000, false);
    assert!(
        matches!(
            g.claim(at(5)).await.expect("answers"),
            Claim::ClaimedByAnother
        ),
        "a fire the recent claims remember is not claimed again"
    );
    assert!(
        matches!(g.claim(at(1)).await.expect("answers"), Claim::AlreadyRan),
        "a fire older than every claim remembered is past"
    );
    match g.claim(at(15)).await.expect("answers") {
        Claim::Acquired(lease) => lease.release().await.expect("release"),
        other => panic!("a fire after the remembered ones: {other:?}"),
    }
    let ahead: bool = raw
        .query_one(
            "SELECT last_fire > now() + interval '50 minutes' FROM cronguard.jobs WHERE job = 'stepped'",
            &[],
        )
        .await
        .expect("select")
        .get(0);
    assert!(ahead, "`last_fire` does not move back");
    let other = guard(&db, "stepped", 30_000, false);
    assert!(
        matches!(
            other.claim(at(15)).await.expect("answers"),
            Claim::ClaimedByAnother
        ),
        "the fire claimed behind it is claimed once"
    );
    // Later fires claimed behind it push it out of the recent claims, oldest first: a claim of
    // it then is past, never granted again.
    for i in 16..26 {
        match g.claim(at(i)).await.expect("answers") {
            Claim::Acquired(lease) => lease.release().await.expect("release"),
            other => panic!("fire {i}: {other:?}"),
        }
    }
    let third = guard(&db, "stepped", 30_000, false);
    match third.claim(at(15)).await.expect("answers") {
        Claim::Acquired(_) => panic!("fire 15 was granted twice"),
        other => assert!(matches!(other, Claim::AlreadyRan), "{other:?}"),
    }
    assert_eq!(g.last_claimed().await.expect("answers"), Some(at(25)));
}

/// A report of a fire another process claimed answers `ClaimedElsewhere` and records nothing; a
/// report of a fire this claimant's own claim took is its own to make.
#[tokio::test]
async fn a_report_of_a_fire_claimed_elsewhere_is_not_a_first_report() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let runner = guard(&db, "queued", 30_000, false);
    let waiter = guard(&db, "queued", 30_000, false);
    let fire = now();
    let lease = match runner.claim(fire).await.expect("answers") {
        Claim::Acquired(lease) => lease,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        waiter.report_drop(fire).await.expect("answers"),
        DropReport::ClaimedElsewhere
    );
    assert_eq!(
        runner.report_drop(fire).await.expect("answers"),
        DropReport::First
    );
    lease.release().await.expect("release");
    let later = fire + TimeDelta::seconds(1);
    assert_eq!(
        waiter.report_drop(later).await.expect("answers"),
        DropReport::First
    );
    assert_eq!(
        runner.report_drop(later).await.expect("answers"),
        DropReport::ReportedElsewhere
    );
}

#[tokio::test]
async fn a_stored_fire_far_ahead_of_the_database_clock_does_not_silence_the_job() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let raw = client(&server).await;
    raw.execute(
        "INSERT INTO cronguard.jobs (job, last_fire) VALUES ('poisoned', now() + interval '1 day')",
        &[],
    )
    .await
    .expect("insert");
    let g = guard(&db, "poisoned", 30_000, false);
    let fire = now();
    match g.claim(fire).await.expect("answers") {
        Claim::Acquired(lease) => lease.release().await.expect("release"),
        other => panic!("a fire behind a poisoned record: {other:?}"),
    }
    assert_eq!(g.last_claimed().await.expect("answers"), Some(fire));
}

#[tokio::test]
async fn a_table_that_is_not_cronguards_is_a_start_error_and_is_left_alone() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let raw = client(&server).await;
    raw.batch_execute(
        "CREATE SCHEMA app; CREATE TABLE app.jobs (id serial PRIMARY KEY, title text)",
    )
    .await
    .expect("a table of the application");
    let err = Database::connect(&server.url(), "app")
        .await
        .err()
        .expect("refused");
    assert!(
        err.contains("`app.jobs` exists but is not the one")
            && err.contains("CRONGUARD_POSTGRES_SCHEMA"),
        "{err}"
    );
    let columns: i64 = raw
        .query_one(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'app' AND table_name = 'jobs'",
            &[],
        )
        .await
        .expect("query")
        .get(0);
    assert_eq!(columns, 2, "the table was not altered");
    // Another schema is fine, and `schema.sql` (what a migration runs) creates the same tables.
    Database::connect(&server.url(), "cronguard_jobs")
        .await
        .expect("a schema of its own");
    raw.batch_execute(&super::schema::create_sql("migrated"))
        .await
        .expect("the SQL of `schema.sql` runs");
    Database::connect(&server.url(), "migrated")
        .await
        .expect("tables made by a migration are recognised");
}

#[tokio::test]
async fn replicas_starting_together_create_the_schema_once() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let url = server.url();
    let starts = (0..6).map(|_| Database::connect(&url, "cronguard"));
    for result in futures_util::future::join_all(starts).await {
        result.expect("every replica starts");
    }
}

#[tokio::test]
async fn the_history_records_runs_with_their_outcome_and_reported_drops() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let g = guard(&db, "history", 30_000, true);
    let fire = now() - TimeDelta::seconds(5);
    let lease = match g.claim(fire).await.expect("answers") {
        Claim::Acquired(lease) => lease,
        other => panic!("{other:?}"),
    };
    let token = lease.fencing_token();
    let running = g
        .history()
        .expect("kept")
        .read(fire)
        .await
        .expect("answers");
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].outcome, Outcome::Running);
    assert_eq!(running[0].fencing_token, Some(token));
    assert!(running[0]
        .lateness
        .is_some_and(|l| l >= Duration::from_secs(5)));
    let mut end = crate::history::HistoryEntry::new("history", fire, "test", Outcome::Failed);
    end.fencing_token = Some(token);
    end.error = Some("disk full: no space left".to_owned());
    g.history()
        .expect("kept")
        .record(end)
        .await
        .expect("records");
    lease.release().await.expect("release");
    let dropped = fire + TimeDelta::seconds(1);
    let mut drop_entry =
        crate::history::HistoryEntry::new("history", dropped, "test", Outcome::Misfired);
    drop_entry.error = Some("started 70 s late".to_owned());
    g.history()
        .expect("kept")
        .record(drop_entry)
        .await
        .expect("records");
    let entries = g
        .history()
        .expect("kept")
        .read(fire)
        .await
        .expect("answers");
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(entries[0].outcome, Outcome::Failed);
    assert_eq!(
        entries[0].error.as_deref(),
        Some("disk full: no space left")
    );
    assert!(entries[0].ended.is_some());
    assert_eq!(entries[1].outcome, Outcome::Misfired);
    assert_eq!(entries[1].fire_time, dropped);
    // A run whose process died is marked lost when the next fire is claimed.
    let crashed = now() - TimeDelta::seconds(2);
    drop(g.claim(crashed).await.expect("answers"));
    let other = guard(&db, "history", 30_000, true);
    let mut next = None;
    for _ in 0..10 {
        let g2 = guard(&db, "history", 100, true);
        // The crashed run's lease is 30 s: free it the way an expired lease is.
        let raw = client(&server).await;
        raw.execute(
            "UPDATE cronguard.jobs SET lease_until = now() WHERE job = 'history'",
            &[],
        )
        .await
        .expect("expire");
        if let Claim::Acquired(lease) = g2.claim(now()).await.expect("answers") {
            next = Some(lease);
            break;
        }
    }
    next.expect("the next fire is claimed")
        .release()
        .await
        .expect("release");
    let entries = other
        .history()
        .expect("kept")
        .read(crashed)
        .await
        .expect("answers");
    assert_eq!(entries[0].outcome, Outcome::Lost, "{entries:?}");
    // Retention deletes old rows.
    let raw = client(&server).await;
    raw.execute(
        "UPDATE cronguard.runs SET fire = fire - interval '40 days' WHERE job = 'history'",
        &[],
    )
    .await
    .expect("age the rows");
    assert_eq!(db.prune_history(30).await.expect("prunes"), 4);
    // Without history on, nothing is kept.
    assert!(guard(&db, "history", 30_000, false).history().is_none());
}

#[tokio::test]
async fn the_database_clock_is_the_guards_clock() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let g = guard(&db, "clock", 30_000, false);
    let skew = crate::guard::skew::measure(&g, Utc::now)
        .await
        .expect("answers")
        .expect("the database has a clock");
    assert!(skew.abs() < TimeDelta::seconds(1), "{skew}");
}

#[tokio::test]
async fn the_guard_works_through_pgbouncer_in_transaction_mode() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let Some(bouncer) = PgBouncer::start(&server) else {
        return;
    };
    // The schema is created through the bouncer too, and every claim may land on another server
    // connection: nothing may depend on a session.
    let db = Arc::new(
        Database::connect(&bouncer.url(), "cronguard")
            .await
            .expect("connects through pgbouncer"),
    );
    let report = crate::guard::conformance::check(|spec| {
        Arc::new(
            PostgresGuard::new(
                Arc::clone(&db),
                &spec.job,
                Arc::from(spec.instance.as_str()),
                spec.lease,
                spec.overlap,
                spec.history,
            )
            .with_misfire_grace(spec.misfire_grace),
        )
    })
    .await
    .unwrap_or_else(|failure| panic!("through pgbouncer: {failure}"));
    assert!(report.skipped.is_empty(), "{report}");
    // Many claims at once share the bouncer's 4 server connections.
    let claims = (0..64).map(|i| {
        let g = guard(&db, &format!("bouncer-{i}"), 30_000, true);
        async move {
            match g.claim(now()).await.expect("answers") {
                Claim::Acquired(lease) => lease.release().await.expect("release"),
                other => panic!("{other:?}"),
            }
        }
    });
    futures_util::future::join_all(claims).await;
}

#[tokio::test]
async fn tables_dropped_under_a_running_guard_are_created_again() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let g = guard(&db, "dropped", 30_000, false);
    let first = now() - TimeDelta::seconds(2);
    match g.claim(first).await.expect("answers") {
        Claim::Acquired(lease) => lease.release().await.expect("release"),
        other => panic!("{other:?}"),
    }
    client(&server)
        .await
        .batch_execute("DROP SCHEMA cronguard CASCADE")
        .await
        .expect("drop");
    // The first claim after the loss fails (and is retried by the scheduler); the schema is
    // made again meanwhile, so the retry is answered.
    let next = now();
    let mut answered = None;
    for _ in 0..3 {
        if let Ok(claim) = g.claim(next).await {
            answered = Some(claim);
            break;
        }
    }
    match answered.expect("claims work again without a restart") {
        Claim::Acquired(lease) => lease.release().await.expect("release"),
        other => panic!("{other:?}"),
    }
}

/// Two replicas claim the same fire of the same 1,000 jobs at once and release what they
/// acquired: each job is acquired exactly once with a fencing token above its last one, the
/// other replica is told `Busy` or `AlreadyRan` as a single claim would be, and the 3,000
/// operations take a few statements, not 3,000 — without a deadlock between the replicas'
/// batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_claims_due_at_once_share_a_few_statements_with_single_answers() {
    const JOBS: usize = 1000;
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let replica = |db: Arc<Database>| {
        (0..JOBS)
            .map(|j| guard(&db, &format!("batch-{j:04}"), 30_000, false))
            .collect::<Vec<_>>()
    };
    let (db_a, db_b) = (database(&server).await, database(&server).await);
    let a = replica(Arc::clone(&db_a));
    let b = replica(Arc::clone(&db_b));
    let earlier = now() - TimeDelta::seconds(10);
    let mut tokens = Vec::new();
    for answer in futures_util::future::join_all(a.iter().map(|g| g.claim(earlier))).await {
        match answer.expect("answers") {
            Claim::Acquired(lease) => {
                tokens.push(lease.fencing_token());
                lease.release().await.expect("release");
            }
            other => panic!("{other:?}"),
        }
    }
    let before = db_a.statements() + db_b.statements();

    let fire = now();
    let claims = a.iter().chain(b.iter()).map(|g| g.claim(fire));
    let leases = crate::guard::tests::acquired_once_each(
        futures_util::future::join_all(claims).await,
        &tokens,
    );
    let released =
        futures_util::future::join_all(leases.into_iter().map(|lease| lease.release())).await;
    assert!(released.iter().all(Result::is_ok));
    let statements = db_a.statements() + db_b.statements() - before;
    println!(
        "{} claims and {JOBS} releases in {statements} statements",
        2 * JOBS
    );
    // Alone on the machine it takes about ten; the bound leaves room for a loaded machine.
    assert!(
        statements <= 60,
        "{statements} statements for {} operations of two replicas",
        3 * JOBS
    );
    let held: i64 = client(&server)
        .await
        .query_one(
            "SELECT count(*) FROM cronguard.jobs WHERE lease_holder IS NOT NULL",
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(held, 0, "every lease is released");
}

fn feed_requests(base: DateTime<Utc>) -> Vec<crate::guard::feed::ControlRequest> {
    use crate::control::ManualRun;
    use crate::guard::feed::{ControlAction, ControlRequest};
    let at = |ms: i64| base + TimeDelta::milliseconds(ms);
    vec![
        ControlRequest {
            job: "report".to_owned(),
            action: ControlAction::Pause {
                by: "ops on call".to_owned(),
            },
            at: at(1),
        },
        ControlRequest {
            job: "report".to_owned(),
            action: ControlAction::Trigger(ManualRun {
                id: u64::MAX - 1,
                requested_at: at(2),
            }),
            at: at(2),
        },
        ControlRequest {
            job: "cleanup".to_owned(),
            action: ControlAction::Resume {
                by: "cli".to_owned(),
            },
            at: at(3),
        },
    ]
}

#[tokio::test]
async fn the_postgres_feed_lists_the_processes_present() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let feed = super::PostgresFeed::new(Arc::clone(&db));
    crate::guard::feed::two_attend(&feed).await;
    client(&server)
        .await
        .batch_execute(
            "UPDATE cronguard.processes SET seen = now() - interval '6 seconds' \
             WHERE process = 'b 2 0002'",
        )
        .await
        .expect("ages a process");
    crate::guard::feed::expect_alone(&feed).await;
}

#[tokio::test]
async fn the_postgres_feed_keeps_partition_leases() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    crate::guard::feed::partition_leases(&super::PostgresFeed::new(db)).await;
}

/// The ids of the trigger requests in `read`.
fn triggers(read: &[crate::guard::feed::ControlRequest]) -> Vec<u64> {
    read.iter()
        .filter_map(|r| match r.action {
            crate::guard::feed::ControlAction::Trigger(run) => Some(run.id),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_postgres_feed_reads_what_was_asked_for_after_its_table_was_reset() {
    use crate::control::ManualRun;
    use crate::guard::feed::{ControlAction, ControlFeed, ControlRequest};
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let feed = super::PostgresFeed::new(Arc::clone(&db));
    let raw = client(&server).await;
    let trigger = |id: u64| ControlRequest {
        job: "report".to_owned(),
        action: ControlAction::Trigger(ManualRun {
            id,
            requested_at: now(),
        }),
        at: now(),
    };
    // The triggers read after `cursor`, the next cursor, and whether the feed was read again
    // from its start.
    let read_on = |cursor: String| {
        let feed = &feed;
        async move {
            let read = feed.read(Some(cursor)).await.expect("reads");
            (triggers(&read.requests), read.cursor, read.restarted)
        }
    };
    let cursor = feed.read(None).await.expect("reads the end").cursor;
    for id in 1..=2 {
        feed.publish(trigger(id)).await.expect("publishes");
    }
    let (read, cursor, restarted) = read_on(cursor).await;
    assert_eq!((read, restarted), (vec![1, 2], false));
    // Emptied with its ids restarted, then more requests than the cursor counts: ids 1 to 3.
    raw.batch_execute("TRUNCATE cronguard.controls RESTART IDENTITY")
        .await
        .expect("truncates");
    for id in 3..=5 {
        feed.publish(trigger(id)).await.expect("publishes");
    }
    let (read, cursor, restarted) = read_on(cursor).await;
    assert_eq!((read, restarted), (vec![3, 4, 5], true), "after TRUNCATE");
    // Restored from an older backup: rows and sequence back to an earlier state, same table.
    raw.batch_execute(
        "DELETE FROM cronguard.controls WHERE id > 1; \
         SELECT setval(pg_get_serial_sequence('cronguard.controls', 'id'), 1)",
    )
    .await
    .expect("goes back");
    feed.publish(trigger(6)).await.expect("publishes");
    let (read, cursor, restarted) = read_on(cursor).await;
    assert_eq!((read, restarted), (vec![3, 6], true), "after a restore");
    // Dropped and made again by the guard's next statement.
    raw.batch_execute("DROP TABLE cronguard.controls")
        .await
        .expect("drops");
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while feed.publish(trigger(7)).await.is_err() {
        assert!(std::time::Instant::now() < until, "the table is made again");
    }
    let (read, cursor, restarted) = read_on(cursor).await;
    assert_eq!(
        (read, restarted),
        (vec![7], true),
        "after the table was made again"
    );
    // Read on as usual from there.
    feed.publish(trigger(8)).await.expect("publishes");
    let (read, cursor, restarted) = read_on(cursor).await;
    assert_eq!((read, restarted), (vec![8], false));
    // A table rewritten in place (a new file node, the same rows) is read again: it only
    // repeats requests, which the jobs take once.
    raw.batch_execute("VACUUM FULL cronguard.controls")
        .await
        .expect("rewrites");
    let (read, cursor, restarted) = read_on(cursor).await;
    assert_eq!((read, restarted), (vec![7, 8], true), "after VACUUM FULL");
    let (read, _, restarted) = read_on(cursor).await;
    assert_eq!((read, restarted), (vec![], false));
}

#[tokio::test]
async fn the_postgres_feed_carries_requests_in_order_and_the_roster() {
    use crate::guard::feed::{ControlFeed, RosterEntry};
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let feed = super::PostgresFeed::new(Arc::clone(&db));
    // Recent: a publish deletes requests older than seven days.
    let base = now() - TimeDelta::minutes(1);
    let (none, cursor) = feed.read(None).await.expect("reads the end").parts();
    assert!(none.is_empty());
    for request in feed_requests(base) {
        feed.publish(request).await.expect("publishes");
    }
    let (read, cursor) = feed.read(Some(cursor)).await.expect("reads").parts();
    assert_eq!(read, feed_requests(base));
    let (again, same) = feed
        .read(Some(cursor.clone()))
        .await
        .expect("reads")
        .parts();
    assert!(again.is_empty(), "{again:?}");
    assert_eq!(same, cursor);
    assert_eq!(feed.read(None).await.expect("reads the end").cursor, cursor);
    assert!(
        feed.read(Some("x".to_owned())).await.is_err(),
        "a cursor that is not an id"
    );

    // Requests older than seven days go when the next one is published.
    let raw = client(&server).await;
    raw.batch_execute("UPDATE cronguard.controls SET at = now() - interval '8 days'")
        .await
        .expect("ages the requests");
    let mut fresh = feed_requests(base).remove(0);
    fresh.at = now();
    feed.publish(fresh.clone()).await.expect("publishes");
    let left: i64 = raw
        .query_one("SELECT count(*) FROM cronguard.controls", &[])
        .await
        .expect("counts")
        .get(0);
    assert_eq!(left, 1, "only the fresh request is kept");
    assert_eq!(
        feed.read(Some(cursor)).await.expect("reads").requests,
        vec![fresh]
    );

    let entry = |job: &str, instance: &str, s: i64| RosterEntry {
        job: job.to_owned(),
        schedule: "every = \"5m\"".to_owned(),
        instance: instance.to_owned(),
        at: DateTime::<Utc>::from_timestamp(1_767_225_600 + s, 0).expect("in range"),
        due_grace: Some(Duration::from_millis(60_000 + s as u64)),
    };
    feed.announce(vec![
        entry("report", "a", 1),
        entry("cleanup", "a", 1),
        entry("report", "a", 2),
    ])
    .await
    .expect("announces, the same job twice too");
    feed.announce(vec![entry("report", "b", 3)])
        .await
        .expect("announces");
    assert_eq!(
        feed.roster().await.expect("lists"),
        vec![entry("cleanup", "a", 1), entry("report", "b", 3)]
    );
}

#[tokio::test]
async fn a_roster_made_before_the_due_grace_gets_it_at_start() {
    use crate::guard::feed::ControlFeed;
    let Some(server) = PostgresServer::start() else {
        return;
    };
    drop(database(&server).await);
    // What an earlier version made and announced: no `due_grace_ms`.
    let raw = client(&server).await;
    raw.batch_execute(
        "ALTER TABLE cronguard.roster DROP COLUMN due_grace_ms; \
         INSERT INTO cronguard.roster (job, schedule, instance, at) \
         VALUES ('older', 'every 5m', 'old', now())",
    )
    .await
    .expect("rolls the roster back");
    let db = database(&server).await;
    let feed = super::PostgresFeed::new(Arc::clone(&db));
    let roster = feed.roster().await.expect("lists");
    assert_eq!(roster.len(), 1);
    assert_eq!(
        (roster[0].job.as_str(), roster[0].due_grace),
        ("older", None),
        "a job an earlier version announced has no grace"
    );
    let mut again = roster[0].clone();
    again.due_grace = Some(Duration::from_secs(90));
    feed.announce(vec![again.clone()]).await.expect("announces");
    assert_eq!(feed.roster().await.expect("lists"), vec![again]);
    // A binary of the earlier version still announces beside this one.
    raw.batch_execute(
        "INSERT INTO cronguard.roster (job, schedule, instance, at) \
         VALUES ('older', 'every 5m', 'old', now()) \
         ON CONFLICT (job) DO UPDATE SET schedule = EXCLUDED.schedule, \
         instance = EXCLUDED.instance, at = EXCLUDED.at",
    )
    .await
    .expect("an earlier version's announce");
}

#[tokio::test]
async fn a_schema_made_before_pauses_gets_them_at_start() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let g = guard(&db, "older", 30_000, false);
    let fire = now() - TimeDelta::seconds(10);
    match g.claim(fire).await.expect("answers") {
        Claim::Acquired(lease) => lease.release().await.expect("release"),
        other => panic!("{other:?}"),
    }
    drop((g, db));
    // What an earlier version made: no pause or manual-run columns, no claim_v2 or claim_v3, no
    // feed tables.
    let raw = client(&server).await;
    raw.batch_execute(
        "DROP FUNCTION cronguard.claim_v1; DROP FUNCTION cronguard.claim_v2; \
         DROP FUNCTION cronguard.claim_v3; \
         DROP FUNCTION cronguard.claim_manual_v1; DROP FUNCTION cronguard.claim_manual_v2; \
         DROP TABLE cronguard.controls, cronguard.roster; \
         ALTER TABLE cronguard.jobs DROP COLUMN paused_at, DROP COLUMN paused_by, \
         DROP COLUMN manual_ids, DROP COLUMN manual_tokens, DROP COLUMN manual_run_ids, \
         DROP COLUMN manual_run_tokens, DROP COLUMN manual_run_requested, \
         DROP COLUMN manual_forgotten",
    )
    .await
    .expect("rolls the schema back");
    let db = database(&server).await;
    let g = guard(&db, "older", 30_000, false);
    assert!(
        matches!(
            g.claim(fire).await.expect("answers"),
            Claim::ClaimedByAnother
        ),
        "the job's record survived the upgrade"
    );
    g.set_pause(Some(crate::control::Pause::new("ops", now())))
        .await
        .expect("pauses");
    assert!(matches!(
        g.claim(fire + TimeDelta::seconds(1))
            .await
            .expect("answers"),
        Claim::Paused { .. }
    ));
    // A binary that predates pauses calls claim_v1: it sees a paused fire as busy.
    let (answer, first): (i32, i64) = {
        let row = raw
            .query_one(
                "SELECT answer, val FROM cronguard.claim_v1('older', now() - interval '5 seconds', \
                 'old-binary', 30000, false, true, 'old-nonce', 1000, 'old', false)",
                &[],
            )
            .await
            .expect("claim_v1 still answers");
        (row.get(0), row.get(1))
    };
    assert_eq!((answer, first), (1, 1), "busy, first report");

    // A later version adds a column: this one still takes the table as its own.
    raw.batch_execute("ALTER TABLE cronguard.jobs ADD COLUMN from_a_later_version integer")
        .await
        .expect("adds a column");
    let db = database(&server).await;
    let g = guard(&db, "older", 30_000, false);
    g.set_pause(None).await.expect("resumes");
    // A binary that predates decided drops calls claim_v2: a fire another process reported as
    // dropped (paused above) is busy to it, and not its to report.
    let row = raw
        .query_one(
            &format!(
                "SELECT answer, val FROM cronguard.claim_v2('older', '{}'::timestamptz, \
                 'old-binary-2', 30000, false, true, 'old-nonce-2', 1000, 'old', false)",
                (fire + TimeDelta::seconds(1)).to_rfc3339()
            ),
            &[],
        )
        .await
        .expect("claim_v2 still answers");
    assert_eq!(
        (row.get::<_, i32>(0), row.get::<_, i64>(1)),
        (1, 0),
        "busy, not a first report"
    );
    assert!(
        matches!(
            g.claim(fire + TimeDelta::seconds(2))
                .await
                .expect("answers"),
            Claim::Acquired(_)
        ),
        "a table with a column of a later version is still cronguard's"
    );
}

async fn acquired(g: &PostgresGuard, fire: DateTime<Utc>) {
    match g.claim(fire).await.expect("answers") {
        Claim::Acquired(lease) => lease.release().await.expect("release"),
        other => panic!("{other:?}, expected Acquired"),
    }
}

/// Replicas starting together after a downtime find the same fires missed: each is reported by
/// one, also when a replica reports one of them dropped at the same moment.
#[tokio::test]
async fn replicas_starting_together_report_each_missed_fire_once() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let base = now() - TimeDelta::minutes(10);
    let at = |s: i64| base + TimeDelta::seconds(s);
    acquired(&guard(&db, "downtime", 30_000, false), at(0)).await;
    let replicas: Vec<PostgresGuard> = (0..8)
        .map(|_| guard(&db, "downtime", 30_000, false))
        .collect();
    let answers =
        futures_util::future::join_all(replicas.iter().map(|g| g.report_missed(at(1), at(5))))
            .await;
    let answers: Vec<_> = answers.into_iter().map(|a| a.expect("answers")).collect();
    assert_eq!(
        answers.iter().filter(|a| **a == Some(at(0))).count(),
        1,
        "one replica reports fires 1 to 5: {answers:?}"
    );
    assert_eq!(
        answers.iter().filter(|a| **a == Some(at(5))).count(),
        7,
        "{answers:?}"
    );
    // A drop reported while the missed fires are: one of the two reports the fire.
    for round in 0..10 {
        let job = format!("race-{round}");
        acquired(&guard(&db, &job, 30_000, false), at(0)).await;
        let (dropping, starting) = (
            guard(&db, &job, 30_000, false),
            guard(&db, &job, 30_000, false),
        );
        let (first, before) = tokio::join!(
            dropping.report_drop(at(3)),
            starting.report_missed(at(1), at(3))
        );
        let (first, before) = (
            first.expect("answers") == DropReport::First,
            before.expect("answers"),
        );
        let missed_reports_it = before.is_some_and(|p| p < at(3));
        assert!(
            first != missed_reports_it,
            "round {round}: first_report {first}, report_missed answered {before:?}"
        );
        assert_eq!(starting.fate_point().await.expect("answers"), Some(at(3)));
    }
}

/// Missed fires whose misfire grace has not passed by the database's clock come from a host
/// whose clock is ahead: refused, and nothing moves (recorded, they would move the fate point
/// past fires still open in other processes). Past the grace they are recorded.
#[tokio::test]
async fn missed_fires_inside_their_grace_by_the_database_clock_are_refused() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let grace = Duration::from_secs(60);
    let g = guard(&db, "ahead", 30_000, false).with_misfire_grace(grace);
    let ten_ago = now() - TimeDelta::seconds(10);
    acquired(&g, ten_ago - TimeDelta::seconds(5)).await;
    let refused = g.report_missed(ten_ago, ten_ago).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("clock is ahead")),
        "{refused:?}"
    );
    assert_eq!(
        g.fate_point().await.expect("answers"),
        Some(ten_ago - TimeDelta::seconds(5))
    );
    let old = now() - TimeDelta::minutes(5);
    let other = guard(&db, "past", 30_000, false).with_misfire_grace(grace);
    acquired(&other, old - TimeDelta::seconds(5)).await;
    assert_eq!(
        other.report_missed(old, old).await.expect("recorded"),
        Some(old - TimeDelta::seconds(5))
    );
    assert_eq!(other.fate_point().await.expect("answers"), Some(old));
}

/// Reports of dropped fires are deleted after an hour; the fate point they moved stays.
#[tokio::test]
async fn the_fate_point_outlives_the_reports() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let (a, b) = (
        guard(&db, "kept", 30_000, false),
        guard(&db, "kept", 30_000, false),
    );
    let base = now() - TimeDelta::minutes(10);
    let at = |s: i64| base + TimeDelta::seconds(s);
    assert_eq!(a.fate_point().await.expect("answers"), None);
    assert_eq!(
        b.report_drop(at(5)).await.expect("answers"),
        DropReport::First
    );
    assert_eq!(a.fate_point().await.expect("answers"), Some(at(5)));
    acquired(&a, at(1)).await;
    let raw = client(&server).await;
    raw.batch_execute(
        "UPDATE cronguard.reports SET reported_at = reported_at - interval '2 hours'",
    )
    .await
    .expect("ages the reports");
    // The next report deletes those older than an hour.
    assert_eq!(
        a.report_drop(at(2)).await.expect("answers"),
        DropReport::First
    );
    let left: i64 = raw
        .query_one(
            "SELECT count(*) FROM cronguard.reports WHERE job = 'kept'",
            &[],
        )
        .await
        .expect("counts")
        .get(0);
    assert_eq!(left, 1, "the report of fire 5 is gone");
    assert_eq!(a.fate_point().await.expect("answers"), Some(at(5)));
    assert_eq!(
        a.report_missed(at(3), at(5)).await.expect("answers"),
        Some(at(5)),
        "fire 5 was reported: nothing more is missed"
    );
}

/// A claim sent on one pooled connection may reach the database after its claimant gave it up
/// on another (the claim timed out, and its abandon and drop report went first): it is refused,
/// so that it neither holds the lock for a lease nor takes the fire from the report.
#[tokio::test]
async fn a_claim_that_arrives_after_its_abandon_takes_nothing() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let (a, b) = (
        guard(&db, "late", 30_000, false),
        guard(&db, "late", 30_000, false),
    );
    let fire = now();
    // The job's row exists without a claim yet (a drop of an earlier fire was reported).
    b.report_drop(fire - TimeDelta::seconds(1))
        .await
        .expect("answers");
    a.abandon(fire).await.expect("answers");
    a.abandon(fire).await.expect("answers");
    let kept: i32 = client(&server)
        .await
        .query_one(
            "SELECT cardinality(abandoned) FROM cronguard.jobs WHERE job = 'late'",
            &[],
        )
        .await
        .expect("reads")
        .get(0);
    assert_eq!(kept, 1, "an abandon asked again keeps its token once");
    assert!(
        matches!(a.claim(fire).await.expect("answers"), Claim::Lapsed),
        "the claim given up before it arrived is refused"
    );
    match b.claim(fire).await.expect("answers") {
        Claim::Acquired(lease) => lease.release().await.expect("release"),
        other => panic!("{other:?}: another claimant takes the fire as if nothing had come"),
    }
}

/// A binary that predates missed fires claims through `claim_v4` (or older): a fire reported
/// missed does not run there either. When it writes its own `claim_v4` (it found a function
/// missing), the claims of this version keep the check, in `claim_v5`.
#[tokio::test]
async fn older_binaries_keep_and_cannot_remove_the_check_of_missed_fires() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let g = guard(&db, "older", 30_000, false);
    let base = now() - TimeDelta::minutes(10);
    let at = |s: i64| base + TimeDelta::seconds(s);
    acquired(&g, at(0)).await;
    assert_eq!(
        g.report_missed(at(1), at(5)).await.expect("answers"),
        Some(at(0))
    );
    let raw = client(&server).await;
    let old_claim = |version: u32, fire: i64| {
        format!(
            "SELECT answer, val FROM cronguard.claim_v{version}('older', '{}'::timestamptz, \
             'old-binary', 30000, false, true, 'old-nonce', 1000, 'old', false)",
            at(fire).to_rfc3339()
        )
    };
    let row = raw.query_one(&old_claim(4, 2), &[]).await.expect("answers");
    assert_eq!(row.get::<_, i32>(0), 8, "dropped by another");
    let row = raw.query_one(&old_claim(2, 3), &[]).await.expect("answers");
    assert_eq!(
        (row.get::<_, i32>(0), row.get::<_, i64>(1)),
        (1, 0),
        "busy, not a first report"
    );
    raw.batch_execute(
        "CREATE OR REPLACE FUNCTION cronguard.claim_v4(
           p_job text, p_fire timestamptz, p_token text, p_lease_ms bigint, p_replace boolean,
           p_skip boolean, p_nonce text, p_tolerance_ms bigint, p_instance text,
           p_history boolean, OUT answer integer, OUT val bigint, OUT ignored boolean,
           OUT paused_at timestamptz, OUT paused_by text)
         LANGUAGE sql AS $$ SELECT 2, 1::bigint, false, NULL::timestamptz, NULL::text $$",
    )
    .await
    .expect("an older binary writes its claim_v4");
    assert!(matches!(
        g.claim(at(4)).await.expect("answers"),
        Claim::DroppedByAnother
    ));
    assert_ne!(
        g.report_drop(at(5)).await.expect("answers"),
        DropReport::First
    );
    acquired(&g, at(6)).await;
}

/// A schema made before missed fires gets the columns and functions at start, and the job's
/// record survives.
#[tokio::test]
async fn a_schema_made_before_missed_fires_gets_them_at_start() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let base = now() - TimeDelta::minutes(10);
    let at = |s: i64| base + TimeDelta::seconds(s);
    acquired(&guard(&db, "before", 30_000, false), at(0)).await;
    drop(db);
    let raw = client(&server).await;
    raw.batch_execute(
        "DROP FUNCTION cronguard.claim_v5; DROP FUNCTION cronguard.first_report_v1; \
         DROP FUNCTION cronguard.report_missed_v1; \
         ALTER TABLE cronguard.jobs DROP COLUMN reported_through, DROP COLUMN missed_through",
    )
    .await
    .expect("rolls the schema back");
    let db = database(&server).await;
    let g = guard(&db, "before", 30_000, false);
    assert_eq!(g.fate_point().await.expect("answers"), Some(at(0)));
    assert_eq!(
        g.report_missed(at(1), at(3)).await.expect("answers"),
        Some(at(0))
    );
    assert!(matches!(
        g.claim(at(2)).await.expect("answers"),
        Claim::DroppedByAnother
    ));
    acquired(&g, at(4)).await;
}

/// Backends waiting for a lock, polled until there are none or `within` passed.
async fn lock_waiters_after(server: &PostgresServer, within: Duration) -> i64 {
    let watcher = client(server).await;
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let waiting: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
                &[],
            )
            .await
            .expect("reads pg_stat_activity")
            .get(0);
        if waiting == 0 || tokio::time::Instant::now() >= deadline {
            return waiting;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An operator's `SELECT … FOR UPDATE` left open on one job's row: the claims of the other jobs
/// are answered, also in a batch with the locked job, and the locked job's claim fails as a
/// timeout that the server ended itself, leaving no backend waiting.
async fn check_a_row_locked_elsewhere(server: &PostgresServer, url: &str) {
    let db = Arc::new(Database::connect(url, "cronguard").await.expect("connects"));
    let (free, held) = (
        guard(&db, "free", 30_000, false),
        guard(&db, "held", 30_000, false),
    );
    let mut fire = now() - TimeDelta::seconds(30);
    for g in [&free, &held] {
        match g.claim(fire).await.expect("answers") {
            Claim::Acquired(lease) => lease.release().await.expect("release"),
            other => panic!("{other:?}"),
        }
    }
    let mut operator = client(server).await;
    let open = operator.transaction().await.expect("begins");
    open.execute(
        "SELECT * FROM cronguard.jobs WHERE job = 'held' FOR UPDATE",
        &[],
    )
    .await
    .expect("locks the row");

    let deadline = Duration::from_secs(10);
    fire += TimeDelta::seconds(1);
    match tokio::time::timeout(deadline, free.claim(fire))
        .await
        .expect("the claim of the free job is answered")
    {
        Ok(Claim::Acquired(lease)) => lease.release().await.expect("release"),
        other => panic!("the free job alone: {other:?}"),
    }
    let alone = tokio::time::timeout(deadline, held.claim(fire))
        .await
        .expect("the claim of the locked job is answered");
    match alone {
        Err(e) => assert_eq!(e.kind(), GuardErrorKind::Timeout, "{e}"),
        Ok(other) => panic!("the locked job alone: {other:?}"),
    }
    assert_eq!(
        lock_waiters_after(server, Duration::from_secs(1)).await,
        0,
        "a backend still waits for the row after the claim failed"
    );

    fire += TimeDelta::seconds(1);
    let before = db.statements();
    let (a, b) = tokio::time::timeout(deadline, async {
        tokio::join!(free.claim(fire), held.claim(fire))
    })
    .await
    .expect("the claims of both jobs are answered");
    assert_eq!(
        db.statements() - before,
        3,
        "the two claims go out in one statement, then each alone"
    );
    match a {
        Ok(Claim::Acquired(lease)) => lease.release().await.expect("release"),
        other => panic!("the free job with the locked one: {other:?}"),
    }
    match b {
        Err(e) => assert_eq!(e.kind(), GuardErrorKind::Timeout, "{e}"),
        Ok(other) => panic!("the locked job with the free one: {other:?}"),
    }
    assert_eq!(
        lock_waiters_after(server, Duration::from_secs(1)).await,
        0,
        "a backend still waits for the row after the batch failed"
    );

    open.rollback()
        .await
        .expect("ends the operator's transaction");
    fire += TimeDelta::seconds(1);
    match held
        .claim(fire)
        .await
        .expect("answers once the row is free")
    {
        Claim::Acquired(lease) => lease.release().await.expect("release"),
        other => panic!("the locked job once free: {other:?}"),
    }
}

#[tokio::test]
async fn a_row_locked_elsewhere_stalls_only_its_own_job() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    check_a_row_locked_elsewhere(&server, &server.url()).await;
}

#[tokio::test]
async fn a_row_locked_elsewhere_stalls_only_its_own_job_through_pgbouncer() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let Some(bouncer) = PgBouncer::start(&server) else {
        return;
    };
    check_a_row_locked_elsewhere(&server, &bouncer.url()).await;
}

/// How many of cronguard's functions in schema `cronguard` begin with `-- revision <revision>`.
async fn functions_at_revision(raw: &tokio_postgres::Client, revision: u32) -> i64 {
    raw.query_one(
        "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
         WHERE n.nspname = 'cronguard' AND p.prosrc LIKE $1",
        &[&format!("%-- revision {revision}\n%")],
    )
    .await
    .expect("reads pg_proc")
    .get(0)
}

/// A function whose body an earlier build wrote (here one that answers no fate point at all, as
/// a body with a bug would) is replaced at the next start, with every other function of that
/// build; the job's record is kept.
#[tokio::test]
async fn functions_an_earlier_build_wrote_are_replaced_at_start() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let db = database(&server).await;
    let base = now() - TimeDelta::minutes(10);
    let at = |s: i64| base + TimeDelta::seconds(s);
    acquired(&guard(&db, "upgraded", 30_000, false), at(0)).await;
    drop(db);
    let raw = client(&server).await;
    raw.batch_execute(&super::schema::create_sql("cronguard").replace("-- revision 1\n", ""))
        .await
        .expect("writes the functions as a build before revisions did");
    raw.batch_execute(
        "CREATE OR REPLACE FUNCTION cronguard.fate_point_v1(p_job text, p_tolerance_ms bigint)
         RETURNS timestamptz LANGUAGE sql STABLE AS $$ SELECT NULL::timestamptz $$",
    )
    .await
    .expect("writes a fate point that answers nothing");
    assert_eq!(functions_at_revision(&raw, 1).await, 0);
    let stale = database(&server).await;
    assert_eq!(
        guard(&stale, "upgraded", 30_000, false)
            .fate_point()
            .await
            .expect("answers"),
        Some(at(0)),
        "the fate point of this version's body"
    );
    assert_eq!(
        functions_at_revision(&raw, 1).await,
        super::schema::function_count()
    );
    acquired(&guard(&stale, "upgraded", 30_000, false), at(1)).await;
}

/// Functions of a later revision than this version's (a later version runs beside it, or this
/// one is a rollback) are left alone, and this version runs with them — also when an earlier
/// build wrote another function again (it found one missing): the later version brings that one
/// up to date, not this one.
#[tokio::test]
async fn functions_of_a_later_revision_are_left_alone() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    drop(database(&server).await);
    let raw = client(&server).await;
    raw.batch_execute(
        "CREATE OR REPLACE FUNCTION cronguard.release_v1(p_job text, p_token text)
         RETURNS boolean LANGUAGE plpgsql AS $release$
         -- revision 2
         BEGIN
           UPDATE cronguard.jobs SET lease_holder = NULL, lease_until = NULL
             WHERE job = p_job AND lease_holder = p_token;
           RETURN FOUND;
         END
         $release$;
         CREATE OR REPLACE FUNCTION cronguard.claim_v3(
           p_job text, p_fire timestamptz, p_token text, p_lease_ms bigint, p_replace boolean,
           p_skip boolean, p_nonce text, p_tolerance_ms bigint, p_instance text,
           p_history boolean, OUT answer integer, OUT val bigint, OUT ignored boolean,
           OUT paused_at timestamptz, OUT paused_by text)
         LANGUAGE sql AS $$ SELECT * FROM cronguard.claim_v4(p_job, p_fire, p_token, p_lease_ms,
           p_replace, p_skip, p_nonce, p_tolerance_ms, p_instance, p_history) $$",
    )
    .await
    .expect("writes a later revision of release_v1, and claim_v3 as an earlier build did");
    let db = database(&server).await;
    let later: String = raw
        .query_one(
            "SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = 'cronguard' AND p.proname = 'release_v1'",
            &[],
        )
        .await
        .expect("reads release_v1")
        .get(0);
    assert!(later.contains("-- revision 2"), "{later}");
    assert_eq!(
        functions_at_revision(&raw, 1).await,
        super::schema::function_count() - 2,
        "claim_v3 left as the earlier build wrote it"
    );
    acquired(&guard(&db, "rollback", 30_000, false), now()).await;
}

/// A schema that holds functions of a later revision but lacks one this version calls is a start
/// error that says what to do, and this version writes none of its older bodies over them.
#[tokio::test]
async fn a_later_schema_missing_a_function_is_a_start_error_that_writes_nothing() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    drop(database(&server).await);
    let raw = client(&server).await;
    raw.batch_execute(
        "CREATE OR REPLACE FUNCTION cronguard.renew_v1(p_job text, p_token text, p_lease_ms bigint)
         RETURNS integer LANGUAGE sql AS $$
         -- revision 2
         SELECT 0 $$;
         DROP FUNCTION cronguard.abandon_v1",
    )
    .await
    .expect("a later renew_v1, abandon_v1 gone");
    let error = Database::connect(&server.url(), "cronguard")
        .await
        .err()
        .expect("a start error");
    assert!(
        error.contains("later version of cronguard (renew_v1)") && error.contains("abandon_v1"),
        "{error}"
    );
    assert_eq!(functions_at_revision(&raw, 2).await, 1, "renew_v1 kept");
}
