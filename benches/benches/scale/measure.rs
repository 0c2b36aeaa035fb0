//! The child processes and what they measure of themselves: every side, N, round and replica runs
//! in a fresh process of this same binary (`SCALE_CHILD=<side>:<mode>:<n>`), so that its CPU
//! (user + sys from `getrusage`) and its peak RSS (`VmHWM`) are its own. A child prints its result
//! as one line, `SCALE_RESULT ` and a JSON object, which the parent parses back into the same type.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, Utc};
use nix::sys::resource::{getrusage, UsageWho};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The prefix of a child's result line.
const RESULT: &str = "SCALE_RESULT ";

/// What a child is to do: `SCALE_CHILD=<side>:<mode>:<n>`.
pub struct ChildSpec {
    pub side: String,
    pub mode: String,
    pub n: usize,
}

impl ChildSpec {
    pub fn new(side: &str, mode: &str, n: usize) -> Self {
        ChildSpec {
            side: side.to_owned(),
            mode: mode.to_owned(),
            n,
        }
    }

    pub fn parse(spec: &str) -> Self {
        let mut parts = spec.split(':');
        let (Some(side), Some(mode), Some(n)) = (parts.next(), parts.next(), parts.next()) else {
            panic!("SCALE_CHILD `{spec}`: expected <side>:<mode>:<n>");
        };
        ChildSpec {
            side: side.to_owned(),
            mode: mode.to_owned(),
            n: n.parse()
                .unwrap_or_else(|_| panic!("SCALE_CHILD `{spec}`: `{n}` is not a job count")),
        }
    }

    pub fn text(&self) -> String {
        format!("{}:{}:{}", self.side, self.mode, self.n)
    }
}

/// Starts a child process for `spec`, with `env` on top of this process's environment.
pub fn spawn(spec: &ChildSpec, env: &[(&str, String)]) -> Child {
    let exe = std::env::current_exe().expect("the path of this benchmark");
    let mut cmd = Command::new(exe);
    cmd.env("SCALE_CHILD", spec.text())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("the benchmark can start itself")
}

/// Waits for `child` and parses its result; `None` (with the reason on stderr) when it failed.
pub fn collect<T: DeserializeOwned>(what: &str, child: Child) -> Option<T> {
    let out = child.wait_with_output().expect("the child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix(RESULT));
    match line {
        Some(line) if out.status.success() => match serde_json::from_str(line) {
            Ok(result) => Some(result),
            Err(e) => {
                eprintln!("scale: child {what}: unreadable result ({e})");
                None
            }
        },
        _ => {
            let head: String = stdout.lines().take(3).collect::<Vec<_>>().join("\n");
            eprintln!("scale: child {what} failed ({}): {head}", out.status);
            None
        }
    }
}

/// Runs one child to its end.
pub fn run<T: DeserializeOwned>(spec: &ChildSpec, env: &[(&str, String)]) -> Option<T> {
    eprintln!("scale: running {} ...", spec.text());
    collect(&spec.text(), spawn(spec, env))
}

/// Prints a child's result for the parent.
pub fn emit<T: Serialize>(result: &T) {
    println!(
        "{RESULT}{}",
        serde_json::to_string(result).expect("a result serialises")
    );
}

/// The runtime every side runs on: multi-thread, 2 workers.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// User + system CPU seconds of this process so far.
pub fn cpu_seconds() -> f64 {
    let u = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    secs(u.user_time()) + secs(u.system_time())
}

/// Peak resident set size in KiB (`VmHWM` of /proc/self/status).
pub fn peak_rss_kib() -> u64 {
    status_kib("VmHWM:")
}

/// Resident set size now, in KiB (`VmRSS` of /proc/self/status).
pub fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"))
}

/// Sleeps this thread until the wall clock reads `t`.
pub fn sleep_until_wall(t: DateTime<Utc>) {
    if let Ok(wait) = (t - Utc::now()).to_std() {
        std::thread::sleep(wait);
    }
}

/// Sleeps until `done` or `give_up` from now, checking every 200 ms.
pub fn wait_until(give_up: Duration, mut done: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + give_up;
    while !done() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Second `s` since the epoch as an instant.
pub fn at_second(s: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(s, 0).expect("a time in range")
}

/// The `q` quantile (nearest rank) of `sorted`; 0 when empty.
pub fn percentile(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
