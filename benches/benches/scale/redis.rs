//! `redis`: N `redis`-guarded jobs every period in three scheduler processes against one local
//! `redis-server` ([`cluster`]), with what the server itself says: script calls (`cmdstat_evalsha` and
//! `cmdstat_eval` of `INFO commandstats`) and its CPU (`used_cpu_sys` + `used_cpu_user` of
//! `INFO cpu`) over the window, per fire; then the server's own ceiling for the guard's claim
//! script, measured with `redis-benchmark` in the same run (each call claims a fresh job, through
//! `__rand_int__` in its keys): one claim per call (`-P 16`), and `SCALE_CEILING_BATCH` claims per
//! call (default 100), as the guard batches the claims of jobs due together.
//!
//! Targets: every fire ran exactly once across the processes; lateness p99 ≤ 100 ms; round trips
//! per fire per replica ≤ 0.01.

use std::process::Command;

use cronguard_testkit::RedisServer;

use crate::cluster::{self, PROCESSES};
use crate::measure::sleep_until_wall;
use crate::report::{thousands, value_row, Verdicts};
use crate::Config;

/// Script calls and CPU seconds of the server so far.
#[derive(Clone, Copy)]
struct ServerStats {
    calls: u64,
    cpu_s: f64,
}

fn info(conn: &mut redis::Connection, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(conn)
        .expect("INFO from redis-server")
}

fn stats(conn: &mut redis::Connection) -> ServerStats {
    let calls = info(conn, "commandstats")
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            let calls: u64 = rest.split(',').next()?.parse().ok()?;
            matches!(name, "evalsha" | "eval").then_some(calls)
        })
        .sum();
    let cpu_s = info(conn, "cpu")
        .lines()
        .filter_map(|l| {
            let (name, value) = l.trim().split_once(':')?;
            matches!(name, "used_cpu_sys" | "used_cpu_user")
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum();
    ServerStats { calls, cpu_s }
}

/// What `redis-benchmark` measured of the claim script.
struct Ceiling {
    claims_per_s: f64,
    /// Server CPU per claim, µs.
    cpu_us_per_claim: f64,
}

/// The arguments of one claim of a fresh job (`__rand_int__` differs in every key).
fn claim_args(fire_ms: i64) -> Vec<String> {
    let mut args: Vec<String> = ["lock", "state", "cancel", "reported"]
        .iter()
        .map(|k| format!("ceiling:{{__rand_int__}}:{k}"))
        .collect();
    args.extend(
        [
            "c",
            &fire_ms.to_string(),
            "ceiling-token",
            "30000",
            "0",
            "1000",
            "1",
            "ceiling-nonce",
            "3600000",
        ]
        .map(str::to_owned),
    );
    args
}

/// The arguments of one history entry of a fresh job, as the guard records the end of a run.
fn history_args(fire_ms: i64) -> Vec<String> {
    vec![
        "ceiling:{__rand_int__}:history".to_owned(),
        "h".to_owned(),
        fire_ms.to_string(),
        format!("{fire_ms}\tsucceeded\t1767225600000000\t3\t12\tscale-1:4242\t-"),
        "1000".to_owned(),
        "2592000000".to_owned(),
    ]
}

/// `redis-benchmark` running the claim operation, `batch` claims per call, each with the history
/// entry of a run's end when `history`; `None` (with the reason on stderr) when it could not run.
fn ceiling(
    server: &RedisServer,
    conn: &mut redis::Connection,
    requests: u64,
    batch: usize,
    history: bool,
) -> Option<Ceiling> {
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(cronguard::__bench::REDIS_BATCH_SCRIPT)
        .query(conn)
        .expect("SCRIPT LOAD");
    // A fire a second ago, so that no claim is too early for the server's clock.
    let fire_ms = chrono::Utc::now().timestamp_millis() - 1000;
    let one = claim_args(fire_ms);
    let entry = history_args(fire_ms);
    let (mut keys, mut args): (Vec<_>, Vec<_>) = (0..batch).map(|_| (&one[..4], &one[4..])).unzip();
    if history {
        keys.extend((0..batch).map(|_| &entry[..1]));
        args.extend((0..batch).map(|_| &entry[1..]));
    }
    let key_count = keys.iter().map(|k| k.len()).sum::<usize>();
    let calls = (requests / batch as u64).max(1);
    let mut cmd = Command::new("redis-benchmark");
    cmd.args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args(["-n", &calls.to_string(), "-r", "1000000000", "--csv"]);
    if batch == 1 {
        cmd.args(["-P", "16"]);
    } else {
        cmd.args(["-P", "1", "-c", "8"]);
    }
    cmd.args(["EVALSHA", &sha, &key_count.to_string()]);
    cmd.args(keys.concat()).args(args.concat());
    let before = stats(conn);
    eprintln!("scale: redis-benchmark, {batch} claim(s) per call (history: {history}) ...");
    let out = match cmd.output() {
        Ok(out) if out.status.success() => out,
        Ok(out) => {
            eprintln!(
                "scale: redis-benchmark failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        Err(e) => {
            eprintln!("scale: redis-benchmark could not start: {e}");
            return None;
        }
    };
    let after = stats(conn);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // `"test","rps",...` then `"EVALSHA ...","12345.67",...`.
    let rps: f64 = stdout
        .lines()
        .filter(|l| !l.starts_with("\"test\""))
        .find_map(|l| l.split("\",\"").nth(1)?.trim_matches('"').parse().ok())?;
    let claims = (after.calls - before.calls) as f64 * batch as f64;
    Some(Ceiling {
        claims_per_s: rps * batch as f64,
        cpu_us_per_claim: (after.cpu_s - before.cpu_s) * 1e6 / claims.max(1.0),
    })
}

pub fn run(cfg: &Config, v: &mut Verdicts) {
    let n = cfg.redis_n;
    if n == 0 {
        return;
    }
    let title = format!(
        "Redis: N = {} jobs, every {} s (redis guard, lease 30 s, empty body, claim_ahead {} ms, ownership {}), {PROCESSES} scheduler processes, one redis-server",
        thousands(n as u64),
        cfg.cluster_period,
        cfg.claim_ahead_ms,
        if cfg.ownership { "on" } else { "off" }
    );
    let Some(server) = RedisServer::start() else {
        println!("\n{title}\n  skipped: redis-server is not installed");
        return;
    };
    let url = server.url();
    let mut conn = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .expect("the benchmark connects to redis-server");
    let launched = cluster::launch(cfg, "redis", n, &url);
    let w = launched.window;
    sleep_until_wall(w.from());
    let s0 = stats(&mut conn);
    sleep_until_wall(w.to());
    let s1 = stats(&mut conn);
    let merged = launched.finish();
    let batch = usize::try_from(crate::env_u64("SCALE_CEILING_BATCH", 100).max(1))
        .expect("SCALE_CEILING_BATCH");
    let single = ceiling(&server, &mut conn, cfg.ceiling_requests, 1, false);
    let batched = ceiling(&server, &mut conn, cfg.ceiling_requests, batch, false);
    let with_history = ceiling(&server, &mut conn, cfg.ceiling_requests, batch, true);
    drop(server);

    println!();
    println!("{title}");
    let Some(m) = merged else {
        println!("  a child process failed (see above)");
        v.failed("redis: the run failed".to_owned());
        return;
    };
    println!("  round trips = `cmdstat_evalsha` + `cmdstat_eval` calls (`INFO commandstats`) over the window; Redis CPU =");
    println!("  `used_cpu_sys` + `used_cpu_user` (`INFO cpu`) over the window; ceiling = `redis-benchmark` running the claim");
    println!("  of the guard's batch script, a fresh job per claim, right after the window on the same server");
    m.print_common("redis", 100.0, v);
    let label = |what: &str| format!("redis N={}: {what}", thousands(n as u64));
    let fires = m.fires as f64;
    let calls = s1.calls - s0.calls;
    let per_replica = calls as f64 / fires / PROCESSES as f64;
    value_row("script calls over the window", thousands(calls), "", "");
    value_row(
        "round trips per fire per replica",
        format!("{per_replica:.5}"),
        "<= 0.01",
        v.check(
            per_replica <= 0.01,
            label("round trips per fire per replica <= 0.01"),
        ),
    );
    let cpu_us_per_fire = (s1.cpu_s - s0.cpu_s) * 1e6 / fires;
    value_row(
        if cfg.ownership {
            "Redis CPU per fire (µs, the owner's claim + 1 release)"
        } else {
            "Redis CPU per fire (µs, 3 claims + 1 release)"
        },
        format!("{cpu_us_per_fire:.2}"),
        "",
        "",
    );
    value_row(
        "Redis CPU over the window (% of a core)",
        format!("{:.1}", 100.0 * (s1.cpu_s - s0.cpu_s) / w.seconds()),
        "",
        "",
    );
    for (what, c) in [
        ("1 claim per call, -P 16".to_owned(), &single),
        (format!("{batch} claims per call"), &batched),
        (
            format!("{batch} claims and {batch} history entries per call"),
            &with_history,
        ),
    ] {
        match c {
            Some(c) => {
                value_row(
                    &format!("ceiling claims/s ({what})"),
                    format!("{:.0}", c.claims_per_s),
                    &format!(
                        "cronguard burst {:.2}x",
                        m.burst_claims_per_s / c.claims_per_s
                    ),
                    "",
                );
                value_row(
                    &format!("  Redis CPU per claim (µs, {what})"),
                    format!("{:.2}", c.cpu_us_per_claim),
                    "",
                    "",
                );
            }
            None => value_row(
                &format!("ceiling claims/s ({what})"),
                "n/a".to_owned(),
                "redis-benchmark failed",
                "",
            ),
        }
    }
}
