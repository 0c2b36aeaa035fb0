//! Claim + release of one fire through the `redis` guard, against a raw loop of `SET NX PX` and a
//! compare-and-delete `EVALSHA` on the same kind of connection, in one run against one local
//! `redis-server`. Prints pairs per second of both, their ratio, and the Redis commands each
//! cronguard fire cost (from `INFO commandstats`).
//!
//! Then the same claim + release through one shared connection for `JOBS` jobs claimed
//! concurrently, side by side on: one `redis-server`, a Redis Cluster of three primaries, and
//! one primary with one replica, without and with `WAIT 1` (`Builder::redis_wait_for_replicas`).
//!
//! `cargo bench -p cronguard-benches --bench redis_claim` (set `PAIRS` to change the count, `JOBS` the
//! number of jobs of the topology comparison).

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use cronguard::__bench::{redis_connection, RedisClaimer};
use cronguard_testkit::{RedisCluster, RedisServer};

const DELETE_IF_OWNER: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// Calls of each command so far (`INFO commandstats`): commands a script runs are counted under
/// their own names, the script call itself under `evalsha`.
async fn command_calls(
    conn: &mut redis::aio::ConnectionManager,
) -> std::collections::HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO");
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            Some((name.to_owned(), rest.split(',').next()?.parse().ok()?))
        })
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let server = RedisServer::start().expect("redis-server is installed");
    let pairs: i64 = std::env::var("PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let client = redis::Client::open(server.url()).expect("url");
    let mut raw = client.get_connection_manager().await.expect("connects");
    let mut stats = client.get_connection_manager().await.expect("connects");
    let claimer = RedisClaimer::connect(&server.url(), "bench")
        .await
        .expect("connects");
    let script = redis::Script::new(DELETE_IF_OWNER);

    // Warm up both paths (loads the scripts).
    for i in 0..1000 {
        assert!(claimer.claim_release(i).await.expect("claim"));
        let _: Option<String> = redis::cmd("SET")
            .arg("raw")
            .arg("t")
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query_async(&mut raw)
            .await
            .expect("SET");
        let _: i64 = script
            .key("raw")
            .arg("t")
            .invoke_async(&mut raw)
            .await
            .expect("EVALSHA");
    }

    // The two loops alternate in blocks, so that both see the same machine load.
    const BLOCK: i64 = 500;
    let mut rounds = Vec::new();
    for round in 0..3 {
        let base = 1_000_000 * (round + 1);
        let before = command_calls(&mut stats).await;
        let (mut ours, mut theirs) = (Duration::ZERO, Duration::ZERO);
        for block in 0..pairs / BLOCK {
            let start = Instant::now();
            for i in block * BLOCK..(block + 1) * BLOCK {
                assert!(claimer.claim_release(base + i).await.expect("claim"));
            }
            ours += start.elapsed();
            let start = Instant::now();
            for i in block * BLOCK..(block + 1) * BLOCK {
                let token = format!("token-{i}");
                let set: Option<String> = redis::cmd("SET")
                    .arg("raw")
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(30_000)
                    .query_async(&mut raw)
                    .await
                    .expect("SET");
                assert!(set.is_some());
                let _: i64 = script
                    .key("raw")
                    .arg(&token)
                    .invoke_async(&mut raw)
                    .await
                    .expect("EVALSHA");
            }
            theirs += start.elapsed();
        }
        let after = command_calls(&mut stats).await;
        let delta = |name: &str| {
            after.get(name).copied().unwrap_or(0) - before.get(name).copied().unwrap_or(0)
        };
        // Per cronguard fire: the raw loop's commands (one `set`, one `evalsha` running a `get`
        // and a `del`) are taken off first.
        let n = (pairs / BLOCK * BLOCK) as u64;
        let trips = delta("evalsha") + delta("eval") + delta("script") - n;
        let total: u64 = after.keys().map(|k| delta(k)).sum::<u64>() - delta("info") - 4 * n;
        let per_s = |d: Duration| n as f64 / d.as_secs_f64();
        rounds.push((
            per_s(ours),
            per_s(theirs),
            trips as f64 / n as f64,
            (total - trips) as f64 / n as f64,
        ));
    }
    println!("redis claim+release, {pairs} pairs per round, one local redis-server, one shared connection");
    println!(
        "{:>6} {:>12} {:>12} {:>7} {:>17} {:>20}",
        "round", "cronguard/s", "raw/s", "ratio", "round trips/fire", "commands in scripts"
    );
    for (i, (ours, theirs, trips, inner)) in rounds.iter().enumerate() {
        let ratio = ours / theirs;
        println!(
            "{:>6} {ours:>12.0} {theirs:>12.0} {ratio:>7.3} {trips:>17.2} {inner:>20.2}",
            i + 1
        );
    }
    let (ours, theirs): (f64, f64) = rounds
        .iter()
        .fold((0.0, 0.0), |a, r| (a.0 + r.0, a.1 + r.1));
    println!("overall ratio cronguard/raw: {:.3}", ours / theirs);
    drop(server);
    topologies(pairs).await;
}

/// Fires per second of `claimers` (one per job, claimed concurrently, each claim + release in
/// turn), over `fires` fires of each job, and the mean latency of one claim + release.
async fn concurrent(claimers: &[RedisClaimer], base: i64, fires: i64) -> (f64, Duration) {
    let start = Instant::now();
    futures_util::future::join_all(claimers.iter().map(|c| async move {
        for i in 0..fires {
            assert!(c.claim_release(base + i).await.expect("claim"));
        }
    }))
    .await;
    let elapsed = start.elapsed();
    let n = claimers.len() as f64 * fires as f64;
    (
        n / elapsed.as_secs_f64(),
        elapsed.mul_f64(claimers.len() as f64 / n),
    )
}

async fn claimers(url: &str, jobs: usize, wait: bool) -> Vec<RedisClaimer> {
    let conn = redis_connection(url).await.expect("connects");
    let wait_conn = redis_connection(url).await.expect("connects");
    (0..jobs)
        .map(|j| {
            let job = format!("bench-{}-{j}", if wait { "wait" } else { "plain" });
            let c = RedisClaimer::with_connection(conn.clone(), &job);
            if wait {
                c.waiting_for_replicas(1, Duration::from_millis(1000), wait_conn.clone())
                    .expect("valid")
            } else {
                c
            }
        })
        .collect()
}

async fn topologies(pairs: i64) {
    let jobs: usize = std::env::var("JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let fires = (pairs / jobs as i64).max(1);
    let single = RedisServer::start().expect("redis-server is installed");
    let cluster = RedisCluster::start(3, 0).expect("redis-server and redis-cli are installed");
    let primary = RedisServer::start().expect("redis-server is installed");
    let _replica = RedisServer::start_replica_of(&primary).expect("redis-server is installed");
    let setups = [
        ("single node", claimers(&single.url(), jobs, false).await),
        (
            "cluster, 3 primaries",
            claimers(&cluster.url(), jobs, false).await,
        ),
        (
            "primary + replica",
            claimers(&primary.url(), jobs, false).await,
        ),
        (
            "primary + replica, WAIT 1",
            claimers(&primary.url(), jobs, true).await,
        ),
    ];
    for (_, c) in &setups {
        concurrent(c, 0, 50).await;
    }
    let mut results = vec![Vec::new(); setups.len()];
    // The setups take turns within each round, so that all see the same machine load.
    for round in 0..3 {
        for (i, (_, c)) in setups.iter().enumerate() {
            let base = 1_000_000 * (round + 1);
            results[i].push(concurrent(c, base, fires).await);
        }
    }
    println!();
    println!(
        "redis claim+release, {jobs} jobs claimed concurrently, {fires} fires each per round, one shared connection"
    );
    println!(
        "{:<28} {:>12} {:>12} {:>12} {:>12} {:>14}",
        "topology", "round 1/s", "round 2/s", "round 3/s", "median/s", "latency (ms)"
    );
    for ((name, _), rounds) in setups.iter().zip(&results) {
        let mut sorted: Vec<(f64, Duration)> = rounds.clone();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (median, latency) = sorted[sorted.len() / 2];
        println!(
            "{name:<28} {:>12.0} {:>12.0} {:>12.0} {median:>12.0} {:>14.3}",
            rounds[0].0,
            rounds[1].0,
            rounds[2].0,
            latency.as_secs_f64() * 1000.0
        );
    }
}
