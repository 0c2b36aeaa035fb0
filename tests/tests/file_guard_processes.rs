//! Real processes of one host share a `file` guard: every fire runs exactly once, and a holder
//! killed with SIGKILL mid-run frees the lock through the kernel.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use cronguard_tests::{read_record, starts_per_fire};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cronguard-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn spawn_worker(dir: &Path, work_ms: u64, run_for_ms: u64, offset_ms: i64) -> Child {
    Command::new(env!("CARGO_BIN_EXE_file_worker"))
        .env("RECORD", dir.join("record"))
        .env("CRONGUARD_LOCK_DIR", dir.join("locks"))
        .env("WORK_MS", work_ms.to_string())
        .env("RUN_FOR_MS", run_for_ms.to_string())
        .env("CLOCK_OFFSET_MS", offset_ms.to_string())
        .stderr(
            std::fs::File::create(
                dir.join(format!("worker-{offset_ms}-{}.log", std::process::id())),
            )
            .expect("log"),
        )
        .spawn()
        .expect("the file_worker binary starts")
}

/// Waits (bounded) until `cond` holds on the record.
/// Waits for every worker to exit successfully, then reads what they recorded.
fn finish(children: &mut [Child], dir: &Path) -> Vec<cronguard_tests::Entry> {
    for c in children.iter_mut() {
        assert!(
            c.wait().expect("wait").success(),
            "a worker failed; see {}",
            dir.display()
        );
    }
    read_record(&dir.join("record"))
}

fn wait_for(
    dir: &Path,
    timeout: Duration,
    what: &str,
    cond: impl Fn(&[cronguard_tests::Entry]) -> bool,
) {
    let until = Instant::now() + timeout;
    while Instant::now() < until {
        if cond(&read_record(&dir.join("record"))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out after {timeout:?} waiting for {what}");
}

#[test]
fn four_processes_run_every_fire_exactly_once() {
    let dir = scratch("four");
    // Clocks up to 400 ms apart: a late replica wakes after the fast run has released the lock.
    let mut children: Vec<Child> = [0, 150, -200, 400]
        .into_iter()
        .map(|offset| spawn_worker(&dir, 50, 6500, offset))
        .collect();
    let entries = finish(&mut children, &dir);
    let per_fire = starts_per_fire(&entries);
    assert!(per_fire.len() >= 5, "too few fires ran: {per_fire:?}");
    for (fire, pids) in &per_fire {
        assert_eq!(
            pids.len(),
            1,
            "fire {fire} ran {} times: {pids:?}",
            pids.len()
        );
    }
    // Consecutive seconds, none missing in the window that every process covered.
    let fires: Vec<i64> = per_fire.keys().copied().collect();
    let inner = &fires[1..fires.len() - 1];
    assert!(
        inner.windows(2).all(|w| w[1] - w[0] == 1000),
        "a fire is missing: {fires:?}"
    );
    let tokens: Vec<u64> = entries
        .iter()
        .filter(|e| e.what == "start")
        .map(|e| e.token)
        .collect();
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens must rise: {tokens:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn killing_the_holder_mid_run_frees_the_lock_and_no_fire_runs_twice() {
    let dir = scratch("kill");
    // Each run takes 2.5 s, so at any moment one process is mid-run.
    let mut children: Vec<Child> = [0, 100, 200]
        .into_iter()
        .map(|offset| spawn_worker(&dir, 2500, 9000, offset))
        .collect();
    wait_for(&dir, Duration::from_secs(5), "a first run", |e| {
        e.iter().any(|e| e.what == "start")
    });
    let entries = read_record(&dir.join("record"));
    let holder = entries
        .iter()
        .rev()
        .find(|e| e.what == "start")
        .expect("a start")
        .clone();
    let victim = children
        .iter_mut()
        .position(|c| c.id() == holder.pid)
        .expect("the holder is ours");
    let mut victim = children.remove(victim);
    victim.kill().expect("SIGKILL");
    let killed_at = Instant::now();
    victim.wait().expect("reaped");
    // The next fire after the kill runs in another process within about one period.
    wait_for(&dir, Duration::from_secs(4), "a run after the kill", |e| {
        e.iter()
            .any(|x| x.what == "start" && x.fire_ms > holder.fire_ms)
    });
    let recovered_after = killed_at.elapsed();
    for c in &mut children {
        assert!(c.wait().expect("wait").success());
    }
    let entries = read_record(&dir.join("record"));
    for (fire, pids) in starts_per_fire(&entries) {
        assert_eq!(pids.len(), 1, "fire {fire} ran twice: {pids:?}");
    }
    assert!(
        !entries
            .iter()
            .any(|e| e.what == "end" && e.fire_ms == holder.fire_ms),
        "the killed run cannot have ended"
    );
    let after: Vec<_> = entries
        .iter()
        .filter(|e| e.what == "start" && e.fire_ms > holder.fire_ms)
        .collect();
    assert!(after.iter().all(|e| e.pid != holder.pid));
    assert!(after.len() >= 2, "runs went on after the kill: {after:?}");
    eprintln!("recovered {recovered_after:?} after SIGKILL");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Checks, in the order the record was written, that no run started while another was going on.
fn assert_runs_never_overlap(entries: &[cronguard_tests::Entry]) {
    let mut running: Option<&cronguard_tests::Entry> = None;
    for e in entries {
        match e.what.as_str() {
            "start" => {
                if let Some(r) = running {
                    panic!(
                        "fire {} started in {} while fire {} was running in {}: {entries:#?}",
                        e.fire_ms, e.pid, r.fire_ms, r.pid
                    );
                }
                running = Some(e);
            }
            "end" => running = None,
            _ => {}
        }
    }
}

#[test]
fn a_lock_file_removed_or_replaced_mid_run_does_not_let_another_process_start() {
    let dir = scratch("replaced");
    let lock = dir.join("locks").join("multi_process_job.lock");
    // Runs take 2.5 s and fire every second: the other process claims at least once per run.
    let mut children: Vec<Child> = [0, 100]
        .into_iter()
        .map(|offset| spawn_worker(&dir, 2500, 8500, offset))
        .collect();
    wait_for(&dir, Duration::from_secs(5), "a first run", |e| {
        e.iter().any(|e| e.what == "start")
    });
    // A tmp cleaner removes the lock file of the running job.
    std::fs::remove_file(&lock).expect("the lock file exists while a run holds it");
    let first = read_record(&dir.join("record"))
        .into_iter()
        .find(|e| e.what == "start")
        .expect("a start");
    wait_for(&dir, Duration::from_secs(6), "a second run", |e| {
        e.iter()
            .any(|x| x.what == "start" && x.fire_ms > first.fire_ms)
    });
    // A deploy step puts a fresh file in its place.
    let fresh = dir.join("locks").join("fresh");
    std::fs::write(&fresh, b"").expect("write");
    std::fs::rename(&fresh, &lock).expect("replace");
    let entries = finish(&mut children, &dir);
    assert_runs_never_overlap(&entries);
    let starts = entries.iter().filter(|e| e.what == "start").count();
    assert!(starts >= 2, "runs went on: {entries:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}
