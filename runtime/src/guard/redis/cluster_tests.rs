//! The Redis guard on a real Redis Cluster: the conformance suite, jobs on every primary, a slot
//! migration under claims, a primary failover, and `WAIT` against the replica of a job's primary.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronguard_testkit::RedisCluster;
use tokio::time::Instant;

use super::{connect, Batcher, RedisConn, RedisGuard, ReplicaWait, Replication};
use crate::guard::{Claim, Guard};
use crate::options::Overlap;

fn t(s: i64) -> DateTime<Utc> {
    // A recent base, so that the server's clock judges the fires as past, not far ahead.
    let base = Utc::now() - TimeDelta::hours(1);
    let base = DateTime::<Utc>::from_timestamp(base.timestamp() / 3600 * 3600, 0).unwrap_or(base);
    base + TimeDelta::seconds(s)
}

fn guard(conn: &RedisConn, scripts: &Arc<Batcher>, job: &str) -> RedisGuard {
    RedisGuard::new(
        conn.clone(),
        Arc::clone(scripts),
        "cronguard",
        job,
        Duration::from_secs(30),
        Overlap::Skip,
    )
}

fn state_key(job: &str) -> String {
    format!("cronguard:{{{job}}}:state")
}

/// Claims `fire` like the job's model does: an error (the cluster is failing over, a slot is
/// moving) is retried until `within` has passed.
async fn claim_retrying(guard: &dyn Guard, fire: DateTime<Utc>, within: Duration) -> Claim {
    let until = Instant::now() + within;
    loop {
        match guard.claim(fire).await {
            Ok(claim) => return claim,
            Err(e) if Instant::now() < until => {
                tracing::debug!(error = %e, "claim failed; retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("fire {fire}: no answer within {within:?}: {e:?}"),
        }
    }
}

/// Every guard value claims `fire`; answers how many acquired it (and releases their leases).
async fn acquisitions(guards: &[&dyn Guard], fire: DateTime<Utc>) -> usize {
    let claims = futures_util::future::join_all(
        guards
            .iter()
            .map(|g| claim_retrying(*g, fire, Duration::from_secs(15))),
    )
    .await;
    let mut acquired = 0;
    for claim in claims {
        if let Claim::Acquired(lease) = claim {
            acquired += 1;
            let _ = lease.release().await;
        }
    }
    acquired
}

/// `first` acquires `fire` and renews its lease (with `WAIT`, a pipeline routed by the job's
/// slot, for a guard that waits for replicas), and then no guard value acquires it again.
async fn acquired_once(first: &dyn Guard, all: &[&dyn Guard], fire: DateTime<Utc>) {
    match claim_retrying(first, fire, Duration::from_secs(10)).await {
        Claim::Acquired(lease) => {
            let renewed = lease.renew().await.expect("renews");
            assert_eq!(renewed, crate::guard::Renewal::Renewed, "fire {fire}");
            lease.release().await.expect("released");
        }
        other => panic!("fire {fire}: {other:?}, expected Acquired"),
    }
    assert_eq!(
        acquisitions(all, fire).await,
        0,
        "fire {fire} acquired twice"
    );
}

#[tokio::test]
async fn cluster_guard_passes_the_conformance_suite() {
    let Some(cluster) = RedisCluster::start(3, 0) else {
        return;
    };
    let conn = connect(&cluster.url()).await.expect("connects");
    super::passes_the_suite(conn.clone()).await;
}

#[tokio::test]
async fn cluster_jobs_on_every_primary_claim_through_one_connection() {
    let Some(cluster) = RedisCluster::start(3, 0) else {
        return;
    };
    let primaries: BTreeSet<u16> = cluster.primaries().into_iter().collect();
    assert_eq!(primaries.len(), 3);
    // Job names until every primary owns the keys of at least one.
    let mut jobs = Vec::new();
    let mut covered = BTreeSet::new();
    for i in 0.. {
        let job = format!("spread{i}");
        covered.insert(cluster.primary_of(&state_key(&job)));
        jobs.push(job);
        if covered == primaries {
            break;
        }
    }
    let conn = connect(&cluster.url()).await.expect("connects");
    let scripts = Batcher::new(conn.clone());
    let guards: Vec<(RedisGuard, RedisGuard)> = jobs
        .iter()
        .map(|job| (guard(&conn, &scripts, job), guard(&conn, &scripts, job)))
        .collect();
    // The claims of every job at once: one batch of the process holds keys of several slots.
    for fire in 1..=3 {
        let counts = futures_util::future::join_all(
            guards
                .iter()
                .map(|(a, b)| async move { acquisitions(&[a as &dyn Guard, b], t(fire)).await }),
        )
        .await;
        assert!(counts.iter().all(|n| *n == 1), "fire {fire}: {counts:?}");
    }
    for (a, _) in &guards {
        assert_eq!(a.last_claimed().await.expect("answers"), Some(t(3)));
        let server = a.server_time().await.expect("answers").expect("a clock");
        assert!((server - Utc::now()).num_seconds().abs() < 5, "{server}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_claims_survive_a_slot_migration() {
    let Some(cluster) = RedisCluster::start(3, 1) else {
        return;
    };
    let job = "migrating";
    let slot = cluster.slot_of(&state_key(job));
    let from = cluster.primary_of(&state_key(job));
    let to = cluster
        .primaries()
        .into_iter()
        .find(|p| *p != from)
        .expect("another primary");
    let conn = connect(&cluster.url()).await.expect("connects");
    let scripts = Batcher::new(conn.clone());
    let plain = guard(&conn, &scripts, job);
    // A claim with WAIT goes as a pipeline, whose redirections the guard follows itself.
    let waiting = guard(&conn, &scripts, job).waiting_for_replicas(Some(Replication::new(
        ReplicaWait::check(1, Duration::from_millis(500)).expect("valid"),
        connect(&cluster.url()).await.expect("connects"),
        connect(&cluster.url()).await.expect("connects"),
    )));
    let both: [&dyn Guard; 2] = [&plain, &waiting];
    let mut fire = 0;
    for _ in 0..2 {
        fire += 1;
        assert_eq!(acquisitions(&both, t(fire)).await, 1, "fire {fire}");
    }
    cluster.begin_migration(slot, from, to);
    cluster.migrate_keys(slot, from, to);
    // The keys are on `to`, the slot still on `from`: a request of one key follows ASK.
    assert_eq!(plain.last_claimed().await.expect("answers"), Some(t(fire)));
    // A claim (several keys, some of them missing) answers TRYAGAIN until the slot has moved,
    // and is retried; it is acquired once the migration ends.
    fire += 1;
    let (acquired, ()) = tokio::join!(acquisitions(&both, t(fire)), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        tokio::task::block_in_place(|| cluster.finish_migration(slot, from, to));
    });
    assert_eq!(acquired, 1, "fire {fire}");
    for guard in [&waiting as &dyn Guard, &plain] {
        fire += 1;
        acquired_once(guard, &both, t(fire)).await;
    }
    assert_eq!(cluster.primary_of(&state_key(job)), to);
    // Back again, with no request in between: the first claim, a pipeline with WAIT, is sent
    // where the slot was and follows MOVED.
    cluster.migrate_slot(slot, to, from);
    for guard in [&waiting as &dyn Guard, &plain, &waiting] {
        fire += 1;
        acquired_once(guard, &both, t(fire)).await;
    }
    for _ in 0..3 {
        fire += 1;
        assert_eq!(acquisitions(&both, t(fire)).await, 1, "fire {fire}");
    }
    assert_eq!(cluster.primary_of(&state_key(job)), from);
    assert_eq!(plain.last_claimed().await.expect("answers"), Some(t(fire)));
    assert!(plain.server_time().await.expect("answers").is_some());
}

#[tokio::test]
async fn cluster_claims_continue_after_a_primary_failover() {
    let Some(mut cluster) = RedisCluster::start(3, 1) else {
        return;
    };
    let job = "failing_over";
    let slot = cluster.slot_of(&state_key(job));
    let primary = cluster.primary_of(&state_key(job));
    let conn = connect(&cluster.url()).await.expect("connects");
    let scripts = Batcher::new(conn.clone());
    let wait = ReplicaWait::check(1, Duration::from_millis(500)).expect("valid");
    let replication = Replication::new(
        wait,
        connect(&cluster.url()).await.expect("connects"),
        connect(&cluster.url()).await.expect("connects"),
    );
    let a = guard(&conn, &scripts, job).waiting_for_replicas(Some(Arc::clone(&replication)));
    let b = guard(&conn, &scripts, job).waiting_for_replicas(Some(replication));
    let before = match claim_retrying(&a, t(1), Duration::from_secs(5)).await {
        Claim::Acquired(lease) => lease,
        other => panic!("{other:?}"),
    };
    let token = before.fencing_token();
    before.release().await.expect("released");
    cluster.kill(primary);
    // Until the replica is promoted, claims fail (and the job's model reports the fires it
    // cannot claim within their grace); the claim acknowledged by the replica survives.
    let new = cluster.wait_for_failover(slot, primary);
    assert_ne!(new, primary);
    // The promoted primary has no replica left: later claims do not wait.
    let (c, d) = (guard(&conn, &scripts, job), guard(&conn, &scripts, job));
    let again = claim_retrying(&c, t(1), Duration::from_secs(15)).await;
    assert!(
        matches!(again, Claim::ClaimedByAnother),
        "a claim acknowledged by the replica survives the failover: {again:?}"
    );
    for fire in 2..=4 {
        assert_eq!(acquisitions(&[&c, &d], t(fire)).await, 1, "fire {fire}");
    }
    match claim_retrying(&c, t(5), Duration::from_secs(5)).await {
        Claim::Acquired(lease) => {
            assert!(lease.fencing_token() > token);
            lease.release().await.expect("released");
        }
        other => panic!("{other:?}"),
    }
    match b.claim(t(6)).await {
        Err(e) if e.kind() == crate::guard::GuardErrorKind::NotReplicated => {
            assert!(e.to_string().contains("reached 0 of the 1"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn cluster_a_frozen_primary_is_an_error_within_the_timeout_not_a_hang() {
    let Some(mut cluster) = RedisCluster::start(3, 0) else {
        return;
    };
    let job = "frozen";
    let frozen = cluster.primary_of(&state_key(job));
    let conn = connect(&cluster.url()).await.expect("connects");
    let scripts = Batcher::new(conn.clone());
    let g = guard(&conn, &scripts, job);
    assert_eq!(acquisitions(&[&g], t(1)).await, 1);
    cluster.pause(frozen);
    let sent = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(5), g.claim(t(2)))
        .await
        .expect("the claim ends instead of hanging");
    assert!(answer.is_err(), "{answer:?}");
    assert!(
        sent.elapsed() < Duration::from_secs(4),
        "{:?}",
        sent.elapsed()
    );
    cluster.resume(frozen);
    let _cluster = tokio::task::spawn_blocking(move || {
        cluster.wait_until_ok();
        cluster
    })
    .await
    .expect("waits");
    // The frozen node applied the claim when it thawed; given up, it frees the lock.
    g.abandon(t(2)).await.expect("abandons");
    assert_eq!(acquisitions(&[&g], t(3)).await, 1);
}

#[tokio::test]
async fn cluster_a_bad_url_is_misconfigured_and_a_cluster_that_is_down_is_unreachable() {
    use super::{open_with, Open, TlsFiles};
    let open = |url: String| async move { open_with(&url, &TlsFiles::default()).await };
    match open("redis+cluster://127.0.0.1".to_owned()).await {
        Open::Misconfigured(why) => assert!(why.contains("host:port"), "{why}"),
        _ => panic!("a node without a port is a misconfiguration"),
    }
    let port = cronguard_testkit::free_port();
    match open(format!("redis+cluster://127.0.0.1:{port}/")).await {
        Open::Unreachable(conn, _) => {
            // Requests fail at once until the cluster answers; they do not wait.
            let g = guard(&conn, &Batcher::new(conn.clone()), "down");
            let sent = Instant::now();
            assert!(g.claim(t(1)).await.is_err());
            assert!(sent.elapsed() < Duration::from_secs(4));
        }
        Open::Ready(_) => panic!("nothing listens on {port}"),
        Open::Misconfigured(why) => {
            panic!("a cluster that is down is not a misconfiguration: {why}")
        }
    }
}
