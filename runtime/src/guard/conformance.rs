//! One suite that every guard must pass: acquire, busy, already-ran for an older or equal fire,
//! release and renewal by the owner only, expiry, and fencing tokens that only rise. (The
//! in-process guard, which the scheduler holds inline, has the same checks in its own module.)

#[cfg_attr(not(feature = "redis"), allow(unused_imports))]
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::file::FileGuard;
#[cfg_attr(not(feature = "redis"), allow(unused_imports))]
use super::{Claim, Guard, Lease, Renewal};

fn t(s: i64) -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH + TimeDelta::days(20_000) + TimeDelta::seconds(s)
}

async fn acquire(guard: &dyn Guard, fire: i64) -> Box<dyn Lease> {
    match guard.claim(t(fire)).await.expect("the guard answers") {
        Claim::Acquired(lease) => lease,
        Claim::AlreadyRan => panic!("fire {fire}: AlreadyRan, expected Acquired"),
        other => panic!("fire {fire}: {other:?}, expected Acquired"),
    }
}

async fn answer(guard: &dyn Guard, fire: i64) -> &'static str {
    match guard.claim(t(fire)).await.expect("the guard answers") {
        Claim::Acquired(lease) => {
            let _ = lease.release().await;
            "acquired"
        }
        Claim::AlreadyRan => "already_ran",
        Claim::Busy { .. } => "busy",
        Claim::Lapsed => "lapsed",
        Claim::Superseded => "superseded",
        Claim::TooEarly { .. } => "too_early",
    }
}

/// What every guard must do, whether or not its leases expire.
async fn exclusion_and_uniqueness(guard: &dyn Guard) {
    let first = acquire(guard, 10).await;
    let t1 = first.fencing_token();
    assert_eq!(
        answer(guard, 20).await,
        "busy",
        "a held guard is busy for a later fire"
    );
    assert_eq!(
        answer(guard, 10).await,
        "already_ran",
        "the same fire twice"
    );
    assert_eq!(answer(guard, 5).await, "already_ran", "an older fire");
    first.release().await.expect("release");
    assert_eq!(
        answer(guard, 10).await,
        "already_ran",
        "after release, the fire stays claimed"
    );
    let second = acquire(guard, 20).await;
    assert!(second.fencing_token() > t1, "fencing tokens rise");
    second.release().await.expect("release");
    let mut last = 0;
    for fire in 21..40 {
        let lease = acquire(guard, fire).await;
        assert!(lease.fencing_token() > last);
        last = lease.fencing_token();
        lease.release().await.expect("release");
    }
}

/// A busy fire is reported as first only once, to whichever process sees it first.
async fn busy_is_first_reported_once(guard: &dyn Guard) {
    let held = acquire(guard, 100).await;
    let firsts: Vec<bool> = futures_util::future::join_all((0..3).map(|_| guard.claim(t(101))))
        .await
        .into_iter()
        .map(|c| match c.expect("answers") {
            Claim::Busy { first_report } => first_report,
            _ => panic!("expected Busy"),
        })
        .collect();
    assert_eq!(firsts.iter().filter(|f| **f).count(), 1, "{firsts:?}");
    held.release().await.expect("release");
}

/// A dropped fire is reported first by exactly one process, and `last_claimed` follows claims.
async fn drops_are_reported_once_and_claims_are_visible(guard: &dyn Guard) {
    assert_eq!(guard.last_claimed().await.expect("answers"), None);
    assert!(guard.first_report(t(300)).await.expect("answers"));
    assert!(!guard.first_report(t(300)).await.expect("answers"));
    assert!(
        !guard.first_report(t(299)).await.expect("answers"),
        "an older fire was covered"
    );
    assert!(guard.first_report(t(301)).await.expect("answers"));
    acquire(guard, 302).await.release().await.expect("release");
    assert_eq!(guard.last_claimed().await.expect("answers"), Some(t(302)));
}

fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cronguard-conf-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[tokio::test]
async fn file_guard_conforms() {
    let dir = scratch_dir("file");
    exclusion_and_uniqueness(&FileGuard::new(&dir, "job")).await;
    busy_is_first_reported_once(&FileGuard::new(&dir, "job2")).await;
    drops_are_reported_once_and_claims_are_visible(&FileGuard::new(&dir, "job3")).await;
    // Two guards on one dir are two processes' views of the same job.
    let a = FileGuard::new(&dir, "shared");
    let b = FileGuard::new(&dir, "shared");
    let held = acquire(&a, 1).await;
    assert_eq!(answer(&b, 2).await, "busy");
    assert_eq!(answer(&b, 1).await, "already_ran");
    held.release().await.expect("release");
    let next = acquire(&b, 2).await;
    next.release().await.expect("release");
    // A wiped lock dir does not send fencing tokens back: they never go below the clock.
    let before = acquire(&a, 3).await.fencing_token();
    std::fs::remove_dir_all(&dir).expect("wipe");
    std::fs::create_dir_all(&dir).expect("recreate");
    assert!(acquire(&a, 4).await.fencing_token() > before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(feature = "redis")]
mod redis {
    use super::*;
    use crate::guard::redis::{connect, RedisGuard, Scripts};
    use crate::Overlap;
    use cronguard_testkit::RedisServer;
    use std::sync::Arc;

    async fn guard(server: &RedisServer, job: &str, lease_ms: u64) -> RedisGuard {
        let conn = connect(&server.url()).await.expect("connects");
        RedisGuard::new(
            conn,
            Arc::new(Scripts::new()),
            "cronguard",
            job,
            Duration::from_millis(lease_ms),
            Overlap::Skip,
        )
    }

    /// Waits (bounded) until the lease of `guard` has expired on the server.
    async fn until_free(guard: &dyn Guard, fire: i64) -> Box<dyn Lease> {
        for _ in 0..200 {
            if let Claim::Acquired(lease) = guard.claim(t(fire)).await.expect("answers") {
                return lease;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the lease never expired");
    }

    #[tokio::test]
    async fn redis_guard_conforms() {
        let Some(server) = RedisServer::start() else {
            return;
        };
        exclusion_and_uniqueness(&guard(&server, "job", 30_000).await).await;
        busy_is_first_reported_once(&guard(&server, "job2", 30_000).await).await;
        drops_are_reported_once_and_claims_are_visible(&guard(&server, "job3", 30_000).await).await;
    }

    #[tokio::test]
    async fn redis_leases_expire_and_only_the_owner_releases_or_renews() {
        let Some(server) = RedisServer::start() else {
            return;
        };
        let g = guard(&server, "expiring", 300).await;
        let old = acquire(&g, 1).await;
        assert_eq!(old.renew().await.expect("renews"), Renewal::Renewed);
        let new = until_free(&g, 2).await;
        assert!(new.fencing_token() > old.fencing_token());
        assert_eq!(
            old.renew().await.expect("answers"),
            Renewal::Lost,
            "a lost lease cannot be renewed"
        );
        old.release().await.expect("answers");
        assert_eq!(
            answer(&g, 3).await,
            "busy",
            "the old holder's release must not free the new holder's lock"
        );
        new.release().await.expect("release");
        assert_eq!(answer(&g, 3).await, "acquired");
    }

    #[tokio::test]
    async fn redis_fencing_tokens_rise_across_a_restart_that_lost_the_data() {
        let Some(mut server) = RedisServer::start() else {
            return;
        };
        let g = guard(&server, "restart", 30_000).await;
        let before = acquire(&g, 1).await.fencing_token();
        server.restart();
        // The connection manager reconnects; the scripts are loaded again after NOSCRIPT.
        let mut after = None;
        for _ in 0..100 {
            match g.claim(t(2)).await {
                Ok(Claim::Acquired(lease)) => {
                    after = Some(lease.fencing_token());
                    break;
                }
                Ok(_) => panic!("an empty server has no holder"),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        let after = after.expect("claims work again after the restart");
        assert!(after > before, "{after} > {before}");
    }

    #[tokio::test]
    async fn replace_asks_the_holder_to_stop_through_its_renewal() {
        let Some(server) = RedisServer::start() else {
            return;
        };
        let conn = connect(&server.url()).await.expect("connects");
        let scripts = Arc::new(Scripts::new());
        let holder_view = RedisGuard::new(
            conn.clone(),
            Arc::clone(&scripts),
            "cronguard",
            "r",
            Duration::from_secs(30),
            Overlap::Replace,
        );
        let held = acquire(&holder_view, 1).await;
        assert_eq!(held.renew().await.expect("renews"), Renewal::Renewed);
        assert_eq!(answer(&holder_view, 2).await, "busy");
        assert_eq!(
            held.renew().await.expect("renews"),
            Renewal::CancelRequested
        );
        held.release().await.expect("release");
        assert_eq!(answer(&holder_view, 2).await, "acquired");
    }
}
