//! Claim + release of one fire through the `redis` guard, against a raw loop of `SET NX PX` and a
//! compare-and-delete `EVALSHA` on the same kind of connection, in one run against one local
//! `redis-server`. Prints pairs per second of both, their ratio, and the Redis commands each
//! cronguard fire cost (from `INFO commandstats`).
//!
//! `cargo bench -p cronguard --bench redis_claim` (set `PAIRS` to change the count).

use std::time::Instant;

use cronguard::__bench::RedisClaimer;
use cronguard_testkit::RedisServer;

const DELETE_IF_OWNER: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// Commands received from clients (`INFO stats`; commands run inside scripts do not count), less
/// the `INFO` call itself.
async fn client_commands(conn: &mut redis::aio::ConnectionManager) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(conn)
        .await
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_commands_processed")
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

    let mut rounds = Vec::new();
    for round in 0..3 {
        let base = 1_000_000 * (round + 1);
        let before = client_commands(&mut stats).await;
        let start = Instant::now();
        for i in 0..pairs {
            assert!(claimer.claim_release(base + i).await.expect("claim"));
        }
        let ours = pairs as f64 / start.elapsed().as_secs_f64();
        let commands = client_commands(&mut stats).await - before - 1;

        let start = Instant::now();
        for i in 0..pairs {
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
        let theirs = pairs as f64 / start.elapsed().as_secs_f64();
        rounds.push((ours, theirs, commands as f64 / pairs as f64));
    }
    println!(
        "redis claim+release, {pairs} pairs per round, one local redis-server, one connection each"
    );
    println!(
        "{:>6} {:>14} {:>14} {:>7} {:>16}",
        "round", "cronguard/s", "raw/s", "ratio", "round trips/fire"
    );
    for (i, (ours, theirs, per_fire)) in rounds.iter().enumerate() {
        println!(
            "{:>6} {:>14.0} {:>14.0} {:>7.3} {:>16.2}",
            i + 1,
            ours,
            theirs,
            ours / theirs,
            per_fire
        );
    }
    let (ours, theirs): (f64, f64) = rounds
        .iter()
        .fold((0.0, 0.0), |a, r| (a.0 + r.0, a.1 + r.1));
    println!("overall ratio cronguard/raw: {:.3}", ours / theirs);
}
