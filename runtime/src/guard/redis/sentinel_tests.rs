//! The Redis guard through Redis Sentinel, against real processes: a primary, a replica and
//! three sentinels (`cronguard_testkit::RedisSentinel`). The primary is killed, or frozen, while
//! two claimants of one job claim a fire after another; claims must continue on the new primary
//! within seconds, fencing tokens must keep rising, and a fire may be acquired twice only within
//! the failover (the last claims before it may not have reached the replica).

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use cronguard_testkit::RedisSentinel;

use super::{connect, open_with, Open, RedisConn, RedisGuard, TlsFiles};
use crate::guard::{Claim, Guard};
use crate::options::Overlap;

fn guard(conn: RedisConn, job: &str) -> RedisGuard {
    RedisGuard::new(
        conn.clone(),
        super::Batcher::new(conn),
        "cronguard",
        job,
        Duration::from_secs(30),
        Overlap::Skip,
    )
}

#[tokio::test]
async fn redis_guard_through_sentinel_passes_the_conformance_suite() {
    let Some(sentinel) = RedisSentinel::start() else {
        return;
    };
    let conn = connect(&sentinel.url()).await.expect("connects");
    super::passes_the_suite(conn.clone()).await;
    let why = match open_with(
        &sentinel.url().replace("/mymaster", "/nosuchmaster"),
        &TlsFiles::default(),
    )
    .await
    {
        Open::Misconfigured(why) => why,
        Open::Ready(_) | Open::Unreachable(..) => panic!("an unknown master name connected"),
    };
    assert!(why.contains("nosuchmaster"), "{why}");
}

#[derive(Debug, Default)]
struct Outcome {
    /// Seconds from the fault to the first claim acquired after it.
    resumed_after: Option<Duration>,
    /// Fires acquired by both claimants, with the time since the fault.
    twice: Vec<(DateTime<Utc>, Duration)>,
    acquired: usize,
    errors: usize,
}

/// Two claimants claim a fire after another (each acquired claim released at once); after
/// `fault_after` claims the fault is made; stops at `after_resume` acquired fires after the
/// fault, or at the deadline.
async fn claims_through(
    sentinel: &mut RedisSentinel,
    fault: impl FnOnce(&mut RedisSentinel),
    after_fault: impl FnOnce(&mut RedisSentinel),
) -> Outcome {
    let a = guard(
        connect(&sentinel.url()).await.expect("connects"),
        "failover",
    );
    let b = guard(
        connect(&sentinel.url()).await.expect("connects"),
        "failover",
    );
    let base = Utc::now() - TimeDelta::hours(1);
    let mut out = Outcome::default();
    let mut last_token = 0;
    let mut faulted_at: Option<Instant> = None;
    let mut after_fault = Some(after_fault);
    let mut fault = Some(fault);
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut acquired_since_fault = 0;
    for i in 0.. {
        if Instant::now() > deadline || acquired_since_fault >= 10 {
            break;
        }
        if i == 10 {
            if let Some(fault) = fault.take() {
                fault(sentinel);
                faulted_at = Some(Instant::now());
            }
        }
        let fire = base + TimeDelta::seconds(i);
        let mut winners = 0;
        for g in [&a, &b] {
            match tokio::time::timeout(Duration::from_secs(5), g.claim(fire)).await {
                Ok(Ok(Claim::Acquired(lease))) => {
                    winners += 1;
                    out.acquired += 1;
                    let token = lease.fencing_token();
                    assert!(
                        token > last_token,
                        "fencing tokens rise: {token} after {last_token} (fire {i})"
                    );
                    last_token = token;
                    if let Some(at) = faulted_at {
                        out.resumed_after.get_or_insert_with(|| at.elapsed());
                        acquired_since_fault += 1;
                    }
                    let _ = lease.release().await;
                }
                Ok(Ok(_)) => {}
                Ok(Err(_)) => out.errors += 1,
                Err(_) => panic!("a claim hung for 5 s (fire {i}); requests must time out"),
            }
        }
        if winners > 1 {
            out.twice
                .push((fire, faulted_at.map(|at| at.elapsed()).unwrap_or_default()));
        }
        if out.resumed_after.is_some() {
            if let Some(after) = after_fault.take() {
                after(sentinel);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    out
}

fn check(what: &str, out: &Outcome) {
    let resumed = out
        .resumed_after
        .unwrap_or_else(|| panic!("{what}: claims never resumed: {out:?}"));
    // Straight to the terminal: the figure is the point of the test.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "\n{what}: claims resumed {resumed:.1?} after the fault ({} acquired, {} failed requests, {} fires acquired twice)\n",
            out.acquired, out.errors, out.twice.len()
        )
        .as_bytes(),
    );
    assert!(resumed < Duration::from_secs(15), "{what}: {out:?}");
    for (fire, since) in &out.twice {
        assert!(
            *since < resumed + Duration::from_secs(1),
            "{what}: fire {fire} acquired twice {since:?} after the fault, outside the failover: {out:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_continue_on_the_new_primary_after_the_primary_is_killed() {
    let Some(mut sentinel) = RedisSentinel::start() else {
        return;
    };
    let out = claims_through(&mut sentinel, RedisSentinel::kill_primary, |_| {}).await;
    check("primary killed", &out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_continue_on_the_new_primary_after_the_primary_is_frozen() {
    let Some(mut sentinel) = RedisSentinel::start() else {
        return;
    };
    let old = sentinel.primary_port();
    // A connection that sends nothing during the freeze: after the failover it still points at
    // the old primary, which the sentinels make a replica when it thaws.
    let idle = guard(connect(&sentinel.url()).await.expect("connects"), "idle");
    let out = claims_through(&mut sentinel, |s| s.pause_primary(), move |s| s.resume(old)).await;
    check("primary frozen", &out);

    // The sentinels disconnect the clients of the old primary when they make it a replica: the
    // idle connection's next request fails, and the one after goes to the new primary.
    assert!(
        sentinel.wait_for_replica(old, Instant::now() + Duration::from_secs(15)),
        "the old primary never became a replica"
    );
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        match idle.claim(Utc::now() - TimeDelta::minutes(1)).await {
            Ok(Claim::Acquired(lease)) => {
                lease.release().await.expect("releases");
                break;
            }
            Ok(other) => panic!("{other:?}, expected Acquired through the new primary"),
            Err(e) => assert!(
                Instant::now() < until,
                "the idle connection never reached the new primary: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A link still connected to a node that has become a replica (`READONLY`, also from inside
    // a script) asks the sentinels again and sends the request to the primary at once.
    let target = super::sentinel::target(&sentinel.url()).expect("parses");
    let mut link = super::sentinel::connect(&target).await.expect("connects");
    for script in [false, true] {
        link.point_at(old).await.expect("connects to the replica");
        let before = link.resolutions();
        let mut cmd = if script {
            redis::cmd("EVAL")
        } else {
            redis::cmd("SET")
        };
        if script {
            cmd.arg("return redis.call('SET', KEYS[1], ARGV[1])").arg(1);
        }
        let reply: redis::RedisResult<redis::Value> = cmd
            .arg("readonly-test")
            .arg("1")
            .query_async(&mut link)
            .await;
        assert!(reply.is_ok(), "script {script}: {reply:?}");
        assert_eq!(link.resolutions(), before + 1, "script {script}");
    }

    // A primary that refuses writes without enough replicas (`NOREPLICAS`) makes the link ask
    // the sentinels again too; here they name the same primary, which refuses again.
    let primary = sentinel
        .wait_for_new_primary(Instant::now() + Duration::from_secs(5))
        .expect("the sentinels name the new primary");
    let set_min_replicas = |n: &str| {
        let mut conn = redis::Client::open(format!("redis://127.0.0.1:{primary}/"))
            .expect("a client")
            .get_connection()
            .expect("connects");
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("min-replicas-to-write")
            .arg(n)
            .exec(&mut conn)
            .expect("CONFIG SET");
    };
    set_min_replicas("5");
    link.point_at(primary)
        .await
        .expect("connects to the primary");
    let before = link.resolutions();
    let reply: redis::RedisResult<()> = redis::cmd("SET")
        .arg("noreplicas-test")
        .arg("1")
        .query_async(&mut link)
        .await;
    set_min_replicas("0");
    let err = reply.expect_err("no primary has 5 replicas");
    assert_eq!(err.code(), Some("NOREPLICAS"), "{err}");
    assert_eq!(link.resolutions(), before + 1);
}
