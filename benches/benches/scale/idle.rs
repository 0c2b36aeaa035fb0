//! `idle`: N jobs on the hourly cron `0 0 * * * *` in UTC, measured for a window in which nothing
//! fires: what the scheduler costs while it waits. Target: CPU ≤ 1 % of one core at 100,000 jobs.

use crate::local::{rss_row, run_child, startup_row, LocalResult, Mode, Side};
use crate::report::{header, ratio, row, thousands, Verdicts};
use crate::Config;

pub fn run(cfg: &Config, v: &mut Verdicts) {
    let n = cfg.idle_n;
    if n == 0 {
        return;
    }
    let b = run_child(Side::Baseline, Mode::Idle, n);
    let c = run_child(Side::Cronguard, Mode::Idle, n);
    match (b, c) {
        (Some(b), Some(c)) => print_idle(n, cfg.idle_seconds, &b, &c, v),
        _ => {
            println!("\nIdle: a child process failed (see above)");
            v.failed("idle: the run failed".to_owned());
        }
    }
}

fn print_idle(n: usize, seconds: u64, b: &LocalResult, c: &LocalResult, v: &mut Verdicts) {
    header(&format!(
        "Idle: N = {} jobs on cron `0 0 * * * *` UTC (nothing fires in the {seconds} s window)",
        thousands(n as u64)
    ));
    let label = |what: &str| format!("idle N={}: {what}", thousands(n as u64));
    startup_row(n, b, c, v, label("start-up < 1 s"));
    row(
        "fires run (expect 0)",
        thousands(b.outside),
        thousands(c.outside),
        String::new(),
        "",
        "",
    );
    let target = if n >= 100_000 {
        "<= 0.100 (1 % of a core)"
    } else {
        ""
    };
    row(
        "CPU s per 10 s",
        format!("{:.3}", b.cpu_per_10s),
        format!("{:.3}", c.cpu_per_10s),
        ratio(c.cpu_per_10s, b.cpu_per_10s),
        target,
        if n >= 100_000 {
            v.check(c.cpu_per_10s <= 0.1, label("CPU <= 1 % of one core"))
        } else {
            ""
        },
    );
    rss_row(n, b, c, v);
}
