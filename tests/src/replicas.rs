//! Replica processes of the fault tests: started with a guard and its store, watched through
//! their shared record, signalled, and waited for.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::{read_record, starts_per_fire, Entry};

/// Replica processes of one scenario, appending to one record in a scratch folder.
pub struct Replicas {
    dir: PathBuf,
    children: Vec<Child>,
}

/// The job settings every replica of a scenario runs with.
#[derive(Clone, Copy)]
pub struct Settings {
    /// The lease, in ms.
    pub lease_ms: u64,
    /// The misfire grace, in ms.
    pub grace_ms: u64,
    /// How long each run works, in ms.
    pub work_ms: u64,
    /// How long each replica runs before it shuts down, in ms.
    pub run_for_ms: u64,
}

impl Replicas {
    /// Starts one `worker` process per clock offset, with `env` (the guard and its store) on top
    /// of the settings.
    pub fn start(
        worker: &str,
        name: &str,
        env: &[(&str, String)],
        s: Settings,
        offsets: &[i64],
    ) -> Replicas {
        let dir =
            std::env::temp_dir().join(format!("cronguard-faults-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let mut replicas = Replicas {
            dir,
            children: Vec::new(),
        };
        replicas.add(worker, env, s, offsets);
        replicas
    }

    /// Starts more `worker` processes that append to the same record (replicas started again
    /// after all were stopped, say).
    pub fn add(&mut self, worker: &str, env: &[(&str, String)], s: Settings, offsets: &[i64]) {
        let dir = &self.dir;
        let first = self.children.len();
        let children: Vec<Child> = offsets
            .iter()
            .enumerate()
            .map(|(i, offset)| {
                let i = first + i;
                Command::new(worker)
                    .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                    .env("RECORD", dir.join("record"))
                    .env("LEASE_MS", s.lease_ms.to_string())
                    .env("GRACE_MS", s.grace_ms.to_string())
                    .env("WORK_MS", s.work_ms.to_string())
                    .env("RUN_FOR_MS", s.run_for_ms.to_string())
                    .env("CLOCK_OFFSET_MS", offset.to_string())
                    .stderr(
                        std::fs::File::create(dir.join(format!("replica-{i}.log"))).expect("log"),
                    )
                    .spawn()
                    .expect("the worker binary starts")
            })
            .collect();
        self.children.extend(children);
    }

    /// Stops every replica still running with `sig` (`-TERM`: a graceful shutdown, `-KILL`) and
    /// waits for each to exit.
    pub fn stop_all(&mut self, sig: &str) {
        for c in &mut self.children {
            if c.try_wait().ok().flatten().is_none() {
                Replicas::signal(c.id(), sig);
            }
        }
        for c in &mut self.children {
            let _ = c.wait();
        }
    }

    /// What the replicas recorded so far.
    pub fn record(&self) -> Vec<Entry> {
        read_record(&self.dir.join("record"))
    }

    /// Waits (bounded) until `cond` holds for the record.
    pub fn wait_for(&self, timeout: Duration, what: &str, cond: impl Fn(&[Entry]) -> bool) {
        let until = Instant::now() + timeout;
        while Instant::now() < until {
            if cond(&self.record()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "timed out after {timeout:?} waiting for {what}; logs in {}",
            self.dir.display()
        );
    }

    /// The process holding a run now (the latest `start` without an `end`).
    pub fn holder(&self) -> Entry {
        let record = self.record();
        record
            .iter()
            .rev()
            .find(|s| {
                s.what == "start"
                    && !record
                        .iter()
                        .any(|e| e.what == "end" && e.fire_ms == s.fire_ms)
            })
            .cloned()
            .expect("a run in progress")
    }

    /// The process id of the `i`-th replica (in the order of the offsets).
    pub fn pid(&self, i: usize) -> u32 {
        self.children[i].id()
    }

    /// The replica process `pid`.
    pub fn child(&mut self, pid: u32) -> &mut Child {
        self.children
            .iter_mut()
            .find(|c| c.id() == pid)
            .expect("one of ours")
    }

    /// Sends `sig` (`-STOP`, `-CONT`, …) to process `pid`.
    pub fn signal(pid: u32, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {sig} {pid}");
    }

    /// Waits for every replica; all must exit cleanly (no panic, no error), except `except` and
    /// those killed on purpose.
    pub fn finish(mut self, except: Option<u32>) -> Vec<Entry> {
        use std::os::unix::process::ExitStatusExt;
        for c in &mut self.children {
            let status = c.wait().expect("wait");
            if Some(c.id()) != except && status.signal() != Some(9) {
                assert!(
                    status.success(),
                    "replica {} failed; logs in {}",
                    c.id(),
                    self.dir.display()
                );
            }
        }
        let record = self.record();
        let _ = std::fs::remove_dir_all(&self.dir);
        record
    }
}

/// Now, in Unix ms.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Every fire started at most once.
pub fn assert_each_fire_once(record: &[Entry]) {
    for (fire, pids) in starts_per_fire(record) {
        assert_eq!(
            pids.len(),
            1,
            "fire {fire} ran {} times: {pids:?}",
            pids.len()
        );
    }
}

/// No fire of a 1 s schedule is missing between the first and the last run.
pub fn assert_no_gaps(record: &[Entry]) {
    let fires: Vec<i64> = starts_per_fire(record).keys().copied().collect();
    assert!(fires.len() >= 5, "too few fires: {fires:?}");
    let inner = &fires[1..fires.len() - 1];
    assert!(
        inner.windows(2).all(|w| w[1] - w[0] == 1000),
        "a fire is missing: {fires:?}"
    );
}
