//! `postgres`: N `postgres`-guarded jobs every period in three scheduler processes against a
//! PostgreSQL the benchmark starts (`initdb` + `postgres`, `fsync=off`) ([`cluster`]), with what
//! the server itself says: committed transactions (`pg_stat_database.xact_commit`; every statement
//! of the guard is its own transaction) over the processes' whole run, read once their pools have
//! closed (a backend reports its statistics late, but always when it exits), against the claims
//! of the whole run; over the window, the transaction ids assigned (every claim, release and
//! renewal statement writes or locks rows, so it takes one), calls of the claim function
//! (`pg_stat_user_functions`, which may lag by a few seconds) and the CPU of the server's processes
//! (`/proc`); then
//! the server's own ceiling for the claim function, measured with `pgbench` in the same run
//! (`-c 8 -j 2`, a custom script calling `cronguard.claim_v5` for a random job of 100,000).
//!
//! Targets: every fire ran exactly once across the processes; lateness p99 ≤ 250 ms; statements
//! per fire per replica ≤ 0.01.

use std::process::Command;

use cronguard_testkit::PostgresServer;

use crate::cluster::{self, PROCESSES};
use crate::measure::sleep_until_wall;
use crate::report::{thousands, value_row, Verdicts};
use crate::Config;

/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`; 100 on Linux).
const CLOCK_TICKS: f64 = 100.0;

/// Committed transactions, claim function calls and server CPU seconds so far.
#[derive(Clone, Copy, Debug)]
struct ServerStats {
    commits: i64,
    /// The next transaction id to be assigned.
    xid: i64,
    claims: i64,
    cpu_s: f64,
}

/// User + sys CPU seconds of the postmaster `pid` and its live children.
fn server_cpu_s(pid: u32) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let mut ticks = 0u64;
    for entry in dir.flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: the fields after the command name.
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ppid: u32 = f.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        if p == pid || ppid == pid {
            let t = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            ticks += t(11) + t(12);
        }
    }
    ticks as f64 / CLOCK_TICKS
}

async fn stats(client: &tokio_postgres::Client, pid: u32) -> ServerStats {
    let row = client
        .query_one(
            "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()), \
             coalesce((SELECT sum(calls)::bigint FROM pg_stat_user_functions WHERE funcname = 'claim_v5'), 0), \
             pg_snapshot_xmax(pg_current_snapshot())::text::bigint",
            &[],
        )
        .await
        .expect("statistics from PostgreSQL");
    ServerStats {
        commits: row.get(0),
        claims: row.get(1),
        xid: row.get(2),
        cpu_s: server_cpu_s(pid),
    }
}

/// `pgbench` calling the claim function; transactions (= claims) per second, or `None` (with the
/// reason on stderr).
fn ceiling(server: &PostgresServer, seconds: u64) -> Option<f64> {
    let dir = std::env::temp_dir().join(format!("cronguard-scale-pgbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let script = dir.join("claim.sql");
    // A 1 ms lease: the next claim of the same job, for a later fire, acquires it again.
    std::fs::write(
        &script,
        "\\set j random(1, 100000)\n\
         SELECT * FROM cronguard.claim_v5('ceiling-' || :j, now(), md5(random()::text), 1, false, true, 'ceiling', 1000, 'pgbench', false);\n",
    )
    .ok()?;
    eprintln!("scale: pgbench -c 8 -j 2 -T {seconds} ...");
    let out = Command::new("pgbench")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &server.port().to_string(),
            "-U",
            "postgres",
        ])
        .args(["-n", "-c", "8", "-j", "2", "-T", &seconds.to_string(), "-f"])
        .arg(&script)
        .arg("postgres")
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = match out {
        Ok(out) if out.status.success() => out,
        Ok(out) => {
            eprintln!(
                "scale: pgbench failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        Err(e) => {
            eprintln!("scale: pgbench could not start: {e}");
            return None;
        }
    };
    // `tps = 1234.567890 (without initial connection time)`.
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        l.trim()
            .strip_prefix("tps = ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

pub fn run(cfg: &Config, v: &mut Verdicts) {
    let n = cfg.postgres_n;
    if n == 0 {
        return;
    }
    let title = format!(
        "PostgreSQL: N = {} jobs, every {} s (postgres guard, lease 30 s, empty body, claim_ahead {} ms, ownership {}), {PROCESSES} scheduler processes, one PostgreSQL",
        thousands(n as u64),
        cfg.cluster_period,
        cfg.claim_ahead_ms,
        if cfg.ownership { "on" } else { "off" }
    );
    let Some(server) = PostgresServer::start() else {
        println!("\n{title}\n  skipped: PostgreSQL (initdb, postgres) is not installed");
        return;
    };
    let url = server.url();
    let pid = server.pid();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let client = rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("the benchmark connects to PostgreSQL");
        tokio::spawn(conn);
        client
    });
    let before = rt.block_on(stats(&client, pid));
    let launched = cluster::launch(cfg, "postgres", n, &url);
    let w = launched.window;
    sleep_until_wall(w.from());
    let s0 = rt.block_on(stats(&client, pid));
    sleep_until_wall(w.to());
    let s1 = rt.block_on(stats(&client, pid));
    let merged = launched.finish();
    // The processes have exited: their backends have reported their statistics, or will at once.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let after = rt.block_on(stats(&client, pid));
    let tps = ceiling(&server, cfg.ceiling_seconds);
    drop(client);
    drop(rt);
    drop(server);

    println!();
    println!("{title}");
    let Some(m) = merged else {
        println!("  a child process failed (see above)");
        v.failed("postgres: the run failed".to_owned());
        return;
    };
    println!("  statements = committed transactions (`pg_stat_database.xact_commit`, each statement its own) from before the");
    println!(
        "  processes started to after they exited, per fire and process of their whole run; write"
    );
    println!("  statements = transaction ids assigned over the window; claim function calls = `pg_stat_user_functions` of `claim_v5`;");
    println!("  PostgreSQL CPU = the postmaster and its processes (`/proc`); ceiling = `pgbench -c 8 -j 2` calling `claim_v5` for");
    println!("  a random job, right after the window");
    m.print_common("postgres", 250.0, v);
    let label = |what: &str| format!("postgres N={}: {what}", thousands(n as u64));
    let fires = m.fires as f64;
    let commits = after.commits - before.commits;
    // Claims per fire: one per process, or the owner's alone with partition ownership.
    let claims_per_fire = if cfg.ownership { 1 } else { PROCESSES as u64 };
    let fires_whole_run = (m.claims_total / claims_per_fire).max(1);
    let per_replica = commits as f64 / (fires_whole_run * PROCESSES as u64) as f64;
    value_row(
        "statements / claims, whole run",
        format!(
            "{} / {}",
            thousands(commits.max(0) as u64),
            thousands(m.claims_total)
        ),
        "",
        "",
    );
    value_row(
        "statements per fire per replica",
        format!("{per_replica:.5}"),
        "<= 0.01",
        v.check(
            per_replica <= 0.01,
            label("statements per fire per replica <= 0.01"),
        ),
    );
    let writes = s1.xid - s0.xid;
    value_row(
        "write statements per fire per replica, window",
        format!("{:.5}", writes as f64 / fires / PROCESSES as f64),
        "",
        "",
    );
    value_row(
        "claim function calls per fire",
        format!("{:.3}", (s1.claims - s0.claims) as f64 / fires),
        &if cfg.ownership {
            "= 1 (the partition's owner)".to_owned()
        } else {
            format!("= {PROCESSES} (one per process)")
        },
        "",
    );
    value_row(
        "PostgreSQL CPU per fire (µs)",
        format!("{:.2}", (s1.cpu_s - s0.cpu_s) * 1e6 / fires),
        "",
        "",
    );
    value_row(
        "PostgreSQL CPU over the window (% of a core)",
        format!("{:.1}", 100.0 * (s1.cpu_s - s0.cpu_s) / w.seconds()),
        "",
        "",
    );
    match tps {
        Some(tps) => value_row(
            "ceiling claims/s (pgbench, 1 claim per statement)",
            format!("{tps:.0}"),
            &format!("cronguard burst {:.2}x", m.burst_claims_per_s / tps),
            "",
        ),
        None => value_row(
            "ceiling claims/s (pgbench)",
            "n/a".to_owned(),
            "pgbench failed",
            "",
        ),
    }
}
