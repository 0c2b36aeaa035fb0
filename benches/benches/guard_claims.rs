//! Claim + release of one fire through the `redis` and the `postgres` guard, side by side in one
//! run against a local `redis-server` and a local PostgreSQL that the benchmark starts: claims
//! per second and claim + release latency, one claim at a time and 32 jobs at once, and the
//! round trips each fire cost, counted by the servers themselves (Redis `INFO commandstats`;
//! PostgreSQL `pg_stat_database.xact_commit` — every statement runs in its own transaction — and
//! `pg_stat_user_functions` for the claim function).
//!
//! `cargo bench -p cronguard-benches --bench guard_claims` (set `PAIRS` to change the count per
//! round).

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use cronguard::__bench::{PostgresClaimer, RedisClaimer};
use cronguard_testkit::{PostgresServer, RedisServer};

struct Stats {
    per_s: f64,
    p50_us: f64,
    p99_us: f64,
}

fn stats(mut latencies: Vec<Duration>, elapsed: Duration) -> Stats {
    latencies.sort();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q) as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    Stats {
        per_s: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50_us: at(0.5),
        p99_us: at(0.99),
    }
}

async fn redis_calls(conn: &mut redis::aio::ConnectionManager) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO");
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            (name == "evalsha" || name == "eval").then_some(())?;
            rest.split(',').next()?.parse::<u64>().ok()
        })
        .sum()
}

/// Committed transactions of the database, and calls of the claim function.
async fn postgres_counts(client: &tokio_postgres::Client) -> (i64, i64) {
    // The statistics are sent by each backend at the end of its transactions, with a delay.
    let _ = client
        .execute("SELECT pg_stat_force_next_flush()", &[])
        .await;
    let row = client
        .query_one(
            "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()), \
             coalesce((SELECT sum(calls)::bigint FROM pg_stat_user_functions WHERE funcname = 'claim_v5'), 0)",
            &[],
        )
        .await
        .expect("stats");
    (row.get(0), row.get(1))
}

async fn sequential<F, Fut>(n: i64, base: i64, claim: F) -> Stats
where
    F: Fn(i64) -> Fut,
    Fut: std::future::Future<Output = Result<bool, String>>,
{
    let mut latencies = Vec::with_capacity(n as usize);
    let start = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        assert!(claim(base + i).await.expect("claim"));
        latencies.push(t.elapsed());
    }
    stats(latencies, start.elapsed())
}

const JOBS: usize = 32;

/// `JOBS` jobs claiming their fires at once, each job one claim at a time.
async fn concurrent<F, Fut>(n: i64, base: i64, claim: F) -> Stats
where
    F: Fn(usize, i64) -> Fut,
    Fut: std::future::Future<Output = Result<bool, String>>,
{
    let start = Instant::now();
    let per_job = n / JOBS as i64;
    let tasks = (0..JOBS).map(|c| {
        let claim = &claim;
        async move {
            let mut latencies = Vec::with_capacity(per_job as usize);
            for i in 0..per_job {
                let t = Instant::now();
                assert!(claim(c, base + i).await.expect("claim"));
                latencies.push(t.elapsed());
            }
            latencies
        }
    });
    let latencies: Vec<Duration> = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .flatten()
        .collect();
    stats(latencies, start.elapsed())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let redis_server = RedisServer::start().expect("redis-server is installed");
    let pg_server = PostgresServer::start().expect("PostgreSQL is installed");
    let pairs: i64 = std::env::var("PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let redis = RedisClaimer::connect(&redis_server.url(), "bench")
        .await
        .expect("connects");
    let redis_jobs: Vec<RedisClaimer> = {
        let conn = cronguard::__bench::redis_connection(&redis_server.url())
            .await
            .expect("connects");
        (0..JOBS)
            .map(|j| RedisClaimer::with_connection(conn.clone(), &format!("bench-{j}")))
            .collect()
    };
    // A pool of its own for each measured phase, closed before the statistics are read.
    let pg_pool = || async {
        PostgresClaimer::connect(&pg_server.url(), "bench")
            .await
            .expect("connects")
    };
    let pg = pg_pool().await;
    let mut redis_stats = redis::Client::open(redis_server.url())
        .expect("url")
        .get_connection_manager()
        .await
        .expect("connects");
    let (pg_stats, conn) = tokio_postgres::connect(&pg_server.url(), tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(conn);

    // Warm-up: connections, scripts, plans.
    for i in 0..500 {
        assert!(redis.claim_release(i).await.expect("claim"));
        assert!(pg.claim_release(i).await.expect("claim"));
    }
    drop(pg);

    println!("claim + release of one fire, {pairs} per round, servers on this host (2 cores shared with the benchmark)");
    println!(
        "{:>6} {:>9} {:>12} {:>10} {:>10} {:>12} {:>12}",
        "round", "guard", "mode", "claims/s", "p50 µs", "p99 µs", "trips/fire"
    );
    let mut totals = [0.0f64; 4];
    for round in 0..3i64 {
        let base = 1_000_000 * (round + 1);
        let before = redis_calls(&mut redis_stats).await;
        let r_seq = sequential(pairs, base, |t| redis.claim_release(t)).await;
        let redis_trips = (redis_calls(&mut redis_stats).await - before) as f64 / pairs as f64;
        let before = postgres_counts(&pg_stats).await;
        let pg = pg_pool().await;
        let p_seq = sequential(pairs, base, |t| pg.claim_release(t)).await;
        drop(pg);
        let after = postgres_counts(&pg_stats).await;
        // Two statements per fire (claim, release), each its own transaction; opening the pool
        // adds a few (its schema check).
        let pg_trips = (after.0 - before.0) as f64 / pairs as f64;
        let pg_claims = (after.1 - before.1) as f64 / pairs as f64;
        let r_con = concurrent(pairs, base, |j, t| redis_jobs[j].claim_release(t)).await;
        let pg = pg_pool().await;
        let pg_jobs: Vec<PostgresClaimer> = (0..JOBS)
            .map(|j| pg.sibling(&format!("bench-{j}")))
            .collect();
        let p_con = concurrent(pairs, base, |j, t| pg_jobs[j].claim_release(t)).await;
        drop((pg, pg_jobs));
        for (guard, mode, s, trips) in [
            ("redis", "one at once", &r_seq, format!("{redis_trips:.2}")),
            (
                "postgres",
                "one at once",
                &p_seq,
                format!("{pg_trips:.2} ({pg_claims:.2} claim)"),
            ),
            ("redis", "32 jobs", &r_con, String::new()),
            ("postgres", "32 jobs", &p_con, String::new()),
        ] {
            println!(
                "{:>6} {guard:>9} {mode:>12} {:>10.0} {:>10.0} {:>12.0} {trips:>12}",
                round + 1,
                s.per_s,
                s.p50_us,
                s.p99_us
            );
        }
        totals[0] += r_seq.per_s;
        totals[1] += p_seq.per_s;
        totals[2] += r_con.per_s;
        totals[3] += p_con.per_s;
    }
    println!(
        "postgres/redis claims per second: one at once {:.2}, 32 jobs {:.2}",
        totals[1] / totals[0],
        totals[3] / totals[2]
    );
}
