//! Reading overrides and applying them to jobs.

use std::time::Duration;

use super::*;
use crate::options::Lock;

fn job(name: &str, schedule: Schedule) -> Job {
    Job::new(name, schedule).run(|_| async {})
}

fn jobs() -> Vec<Job> {
    vec![
        job(
            "reports::nightly",
            Schedule::cron("0 30 2 * * *", "Europe/Berlin").expect("valid"),
        ),
        job(
            "cleanup",
            Schedule::every(Duration::from_secs(10)).expect("valid"),
        )
        .lock(Lock::Redis),
    ]
}

fn vars(pairs: &[(&str, &str)]) -> Inputs {
    let mut inputs = Inputs::default();
    inputs.set_vars(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    inputs
}

/// The jobs after the overrides, and the messages of the problems (of the overrides, then of the
/// jobs' settings as `start()` checks them).
fn apply_vars(jobs: &mut [Job], pairs: &[(&str, &str)]) -> Vec<String> {
    let mut problems = Vec::new();
    apply(&vars(pairs), jobs, &mut problems);
    for job in jobs.iter() {
        problems.extend(job.problems());
    }
    problems
        .into_iter()
        .map(|p| p.message().to_owned())
        .collect()
}

#[test]
fn no_override_leaves_every_job_alone() {
    let mut all = jobs();
    let problems = apply_vars(&mut all, &[("CRONGUARD_JOBS", "x"), ("PATH", "/bin")]);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(all.iter().all(|j| j.overrides.is_none()));
}

#[test]
fn a_cron_override_keeps_the_jobs_zone_and_every_replaces_both() {
    let mut all = jobs();
    let problems = apply_vars(
        &mut all,
        &[("CRONGUARD_JOB__REPORTS__NIGHTLY__CRON", "0 0 3 * * *")],
    );
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        all[0].schedule.describe(),
        "at 03:00 every day (Europe/Berlin)"
    );
    let overrides = all[0].overrides.as_deref().expect("overridden");
    assert_eq!(overrides.len(), 1);
    assert_eq!(overrides[0].setting, "cron");
    assert_eq!(overrides[0].value, "0 0 3 * * *");
    assert_eq!(
        overrides[0].source.to_string(),
        "environment variable `CRONGUARD_JOB__REPORTS__NIGHTLY__CRON`"
    );

    let mut all = jobs();
    let problems = apply_vars(
        &mut all,
        &[("CRONGUARD_JOB__REPORTS__NIGHTLY__TZ", "Asia/Tokyo")],
    );
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        all[0].schedule.describe(),
        "at 02:30 every day (Asia/Tokyo)"
    );

    let mut all = jobs();
    let problems = apply_vars(
        &mut all,
        &[("CRONGUARD_JOB__REPORTS__NIGHTLY__EVERY", "5m")],
    );
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(all[0].schedule.interval(), Some(Duration::from_secs(300)));

    let mut all = jobs();
    let problems = apply_vars(&mut all, &[("CRONGUARD_JOB__CLEANUP__CRON", "*/5 * * * *")]);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(all[1].schedule.to_string(), "cron `*/5 * * * *` in UTC");
}

#[test]
fn a_schedule_override_is_checked_like_the_attribute() {
    let mut all = jobs();
    let problems = apply_vars(
        &mut all,
        &[
            ("CRONGUARD_JOB__REPORTS__NIGHTLY__CRON", "0 0 L-31 * *"),
            ("CRONGUARD_JOB__REPORTS__NIGHTLY__TZ", "Europe/Berln"),
        ],
    );
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert_eq!(
        problems[0],
        "job `reports::nightly`: environment variable `CRONGUARD_JOB__REPORTS__NIGHTLY__CRON`: invalid cron expression `0 0 L-31 * *` at column 5: `L-31` in the day-of-month field: `L-N` counts 0-30 days back from the last day of the month, so N must be at most 30\n    0 0 L-31 * *\n        ^^^^"
    );
    assert!(
        problems[1].starts_with("job `reports::nightly`: environment variable `CRONGUARD_JOB__REPORTS__NIGHTLY__TZ`: unknown time zone `Europe/Berln`")
            && problems[1].ends_with("(did you mean `Europe/Berlin`?)"),
        "{problems:?}"
    );
    assert_eq!(
        all[0].schedule.describe(),
        "at 02:30 every day (Europe/Berlin)",
        "not applied"
    );
    assert!(all[0].overrides.is_none());

    let mut all = jobs();
    let problems = apply_vars(&mut all, &[("CRONGUARD_JOB__CLEANUP__TZ", "UTC")]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("`tz` applies only to `cron`"),
        "{problems:?}"
    );
    let mut all = jobs();
    let problems = apply_vars(
        &mut all,
        &[
            ("CRONGUARD_JOB__CLEANUP__CRON", "* * * * *"),
            ("CRONGUARD_JOB__CLEANUP__EVERY", "1m"),
        ],
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("job `cleanup`: environment variable `CRONGUARD_JOB__CLEANUP__EVERY`: `cron` cannot be combined with `every`")
            && problems[0].ends_with("the other is `cron` from environment variable `CRONGUARD_JOB__CLEANUP__CRON`: give one of them"),
        "{problems:?}"
    );
    let mut all = jobs();
    let problems = apply_vars(&mut all, &[("CRONGUARD_JOB__CLEANUP__EVERY", "0s")]);
    assert_eq!(
        problems,
        ["job `cleanup`: environment variable `CRONGUARD_JOB__CLEANUP__EVERY`: the duration `0s` is zero; give a positive duration such as `30s`"]
    );
}

#[test]
fn limits_and_flags_are_applied_after_the_attributes_checks() {
    let mut all = jobs();
    let problems = apply_vars(
        &mut all,
        &[
            ("CRONGUARD_JOB__CLEANUP__ENABLED", "false"),
            ("CRONGUARD_JOB__CLEANUP__TIMEOUT", "5m"),
            ("CRONGUARD_JOB__CLEANUP__RETRIES", "3"),
            ("CRONGUARD_JOB__CLEANUP__BACKOFF", "2s"),
            ("CRONGUARD_JOB__CLEANUP__JITTER", "5s"),
            ("CRONGUARD_JOB__CLEANUP__STANDBY", "0s"),
            ("CRONGUARD_JOB__CLEANUP__LEASE", "20s"),
            ("CRONGUARD_JOB__CLEANUP__MISFIRE_GRACE", "2m"),
            ("CRONGUARD_JOB__CLEANUP__OVERLAP", "queue"),
            ("CRONGUARD_JOB__CLEANUP__COALESCE", "true"),
        ],
    );
    assert!(problems.is_empty(), "{problems:?}");
    let cleanup = &all[1];
    assert!(!cleanup.enabled);
    assert_eq!(cleanup.timeout, Some(Duration::from_secs(300)));
    assert_eq!(cleanup.retries, 3);
    assert_eq!(cleanup.backoff, Some(Duration::from_secs(2)));
    assert_eq!(cleanup.jitter, Some(Duration::from_secs(5)));
    assert_eq!(cleanup.standby, Some(Duration::ZERO));
    assert_eq!(cleanup.lease, Some(Duration::from_secs(20)));
    assert_eq!(cleanup.misfire_grace, Duration::from_secs(120));
    assert_eq!(cleanup.overlap, Overlap::Queue);
    assert!(cleanup.coalesce);
    let settings: Vec<&str> = cleanup
        .overrides
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|o| o.setting.as_str())
        .collect();
    assert_eq!(
        settings,
        [
            "lease",
            "overlap",
            "coalesce",
            "misfire_grace",
            "timeout",
            "retries",
            "backoff",
            "jitter",
            "standby",
            "enabled"
        ],
        "in the order of the settings table"
    );
}

#[test]
fn a_value_the_attribute_refuses_gets_the_attributes_message() {
    let mut all = jobs();
    let problems = apply_vars(
        &mut all,
        &[
            ("CRONGUARD_JOB__CLEANUP__TIMEOUT", "30d"),
            ("CRONGUARD_JOB__CLEANUP__JITTER", "2days"),
            ("CRONGUARD_JOB__CLEANUP__RETRIES", "500"),
            ("CRONGUARD_JOB__CLEANUP__OVERLAP", "queued"),
            ("CRONGUARD_JOB__CLEANUP__MAX_INSTANCES", "0"),
            ("CRONGUARD_JOB__CLEANUP__LEASE", "10ms"),
        ],
    );
    let prefix = "job `cleanup`: environment variable `CRONGUARD_JOB__CLEANUP__";
    let expected = [
        "LEASE`: `lease = \"10ms\"` is out of range; give a lease from 100ms to 24h",
        "MAX_INSTANCES`: `max_instances` must be at least 1; it is the number of runs of this job allowed at once",
        "OVERLAP`: unknown overlap policy `queued`; did you mean `queue`? expected one of: `skip` (drop the fire), `queue` (wait for a free slot) or `replace` (cancel the oldest running instance)",
        "TIMEOUT`: `timeout = \"30d\"` is out of range; give a duration from 1ms to 7d (leave `timeout` out for runs without a deadline)",
        "RETRIES`: `retries = 500` is too many; give at most 100 retries (every attempt must start within the fire's misfire grace anyway)",
        "JITTER`: `jitter = \"2days\"` is out of range; give a duration from 1ms to 24h (keep it well below the interval between fires)",
    ];
    assert_eq!(problems.len(), expected.len(), "{problems:?}");
    for (problem, tail) in problems.iter().zip(expected) {
        assert!(
            problem.starts_with(&format!("{prefix}{tail}")),
            "{problem}\n  expected {prefix}{tail}"
        );
    }
    assert!(all[1].overrides.is_none(), "nothing applied");
}

#[test]
fn a_conflict_gets_jobconfigs_message_and_names_the_override() {
    let mut all = jobs();
    let problems = apply_vars(
        &mut all,
        &[
            ("CRONGUARD_JOB__CLEANUP__MAX_INSTANCES", "2"),
            ("CRONGUARD_JOB__REPORTS__NIGHTLY__BACKOFF", "10s"),
            ("CRONGUARD_JOB__REPORTS__NIGHTLY__LEASE", "10s"),
        ],
    );
    assert_eq!(
        problems,
        [
            "job `reports::nightly`: `lease` applies only to guards with leases (`lock = \"redis\"`, `\"postgres\"` or a custom guard), not to `lock = \"local\"` (overridden: `lease = \"10s\"` from environment variable `CRONGUARD_JOB__REPORTS__NIGHTLY__LEASE`)",
            "job `reports::nightly`: `backoff` is the pause between retries, but the job has no `retries`; add `retries = N` or remove `backoff` (overridden: `backoff = \"10s\"` from environment variable `CRONGUARD_JOB__REPORTS__NIGHTLY__BACKOFF`)",
            "job `cleanup`: `max_instances = 2` needs `lock = \"local\"`; the `redis` guard runs one instance at a time (overridden: `max_instances = 2` from environment variable `CRONGUARD_JOB__CLEANUP__MAX_INSTANCES`)",
        ]
    );
    // A jitter the job had, against a schedule an override made denser.
    let mut all = vec![job(
        "spread",
        Schedule::every(Duration::from_secs(3600)).expect("valid"),
    )
    .jitter(Duration::from_secs(120))];
    let problems = apply_vars(&mut all, &[("CRONGUARD_JOB__SPREAD__EVERY", "1m")]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("is not shorter than the shortest gap between two fires of the schedule (1m)")
            && problems[0].ends_with("(overridden: `every = \"1m\"` from environment variable `CRONGUARD_JOB__SPREAD__EVERY`)"),
        "{problems:?}"
    );
}

#[test]
fn an_override_of_no_job_is_an_error_naming_the_closest() {
    let mut all = jobs();
    let problems = apply_vars(
        &mut all,
        &[("CRONGUARD_JOB__REPORTS__NIGTHLY__CRON", "0 0 3 * * *")],
    );
    assert_eq!(
        problems,
        ["environment variable `CRONGUARD_JOB__REPORTS__NIGTHLY__CRON`: no job's name is written `REPORTS__NIGTHLY`; did you mean `CRONGUARD_JOB__REPORTS__NIGHTLY__CRON` (job `reports::nightly`)? A variable writes a job's name in capitals with `_` for every other character than a letter or digit (`reports::nightly` is `REPORTS__NIGHTLY`)"]
    );
    let problems = apply_vars(&mut all, &[("CRONGUARD_JOB__BANANA__CRON", "0 0 3 * * *")]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains(
            "no job's name is written `BANANA`; the jobs are `cleanup`, `reports::nightly`."
        ),
        "{problems:?}"
    );
}

#[test]
fn a_blank_variable_sets_nothing_but_must_name_a_job() {
    let mut all = jobs();
    let problems = apply_vars(
        &mut all,
        &[
            ("CRONGUARD_JOB__CLEANUP__TIMEOUT", ""),
            ("CRONGUARD_JOB__CLEANUPP__TIMEOUT", " "),
        ],
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("environment variable `CRONGUARD_JOB__CLEANUPP__TIMEOUT`: no job's name is written `CLEANUPP`; did you mean `CRONGUARD_JOB__CLEANUP__TIMEOUT`"),
        "{problems:?}"
    );
    assert_eq!(all[1].timeout, None);
    assert!(all[1].overrides.is_none());
}

#[test]
fn a_variable_that_two_names_share_is_refused() {
    let every = || Schedule::every(Duration::from_secs(60)).expect("valid");
    let mut all = vec![
        job("sync-a", every()),
        job("sync_a", every()),
        job("sync.b", every()),
    ];
    let problems = apply_vars(&mut all, &[("CRONGUARD_JOB__SYNC_A__ENABLED", "false")]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0]
            .contains("names more than one job: `sync-a`, `sync_a` are all written `SYNC_A`"),
        "{problems:?}"
    );
    assert!(all.iter().all(|j| j.enabled), "applied to none");
    let problems = apply_vars(&mut all, &[("CRONGUARD_JOB__SYNC_B__ENABLED", "false")]);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(!all[2].enabled);
}

#[cfg(feature = "toml")]
mod file {
    use super::*;

    fn apply_file(jobs: &mut [Job], text: &str, pairs: &[(&str, &str)]) -> Vec<String> {
        let dir = std::env::temp_dir().join(format!(
            "cronguard-overrides-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let path = dir.join("overrides.toml");
        std::fs::write(&path, text).expect("written");
        let mut inputs = vars(pairs);
        inputs.set_file(path.clone());
        let mut problems = Vec::new();
        apply(&inputs, jobs, &mut problems);
        for job in jobs.iter() {
            problems.extend(job.problems());
        }
        let _ = std::fs::remove_dir_all(&dir);
        let shown = path.display().to_string();
        problems
            .into_iter()
            .map(|p| p.message().replace(&shown, "overrides.toml"))
            .collect()
    }

    #[test]
    fn a_table_overrides_the_job_of_its_name_and_a_variable_wins() {
        let mut all = jobs();
        let problems = apply_file(
            &mut all,
            "# staging\n[[job]]\nname = \"reports::nightly\"\ncron = \"0 0 4 * * *\"\ntimeout = \"1m\"\n\n[[job]]\nname = \"cleanup\"\nenabled = false\n",
            &[("CRONGUARD_JOB__REPORTS__NIGHTLY__TIMEOUT", "2m")],
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            all[0].schedule.describe(),
            "at 04:00 every day (Europe/Berlin)"
        );
        assert_eq!(all[0].timeout, Some(Duration::from_secs(120)));
        assert!(!all[1].enabled);
        let overrides = all[0].overrides.as_deref().unwrap_or_default();
        assert_eq!(overrides.len(), 2);
        assert!(matches!(
            &overrides[0].source,
            OverrideSource::File { line: 4, path } if path.ends_with("overrides.toml")
        ));
        assert_eq!(
            overrides[1].source.to_string(),
            "environment variable `CRONGUARD_JOB__REPORTS__NIGHTLY__TIMEOUT`"
        );
        assert!(matches!(
            all[1].overrides.as_deref().unwrap_or_default(),
            [SettingOverride {
                source: OverrideSource::File { line: 9, .. },
                ..
            }]
        ));
    }

    #[test]
    fn the_files_problems_name_their_line() {
        let mut all = jobs();
        let problems = apply_file(
            &mut all,
            "[[job]]\nname = \"reports::nightly\"\ncron = \"0 0 L-31 * *\"\nlock = \"redis\"\n\n[[job]]\nname = \"reports::nightyl\"\nenabled = false\ntimeout = \"1m\"\n\n[[job]]\nname = \"cleanup\"\nmax_instances = 3\n",
            &[],
        );
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(
            problems[0].starts_with("job `reports::nightly`: overrides file `overrides.toml:4`: `lock` cannot be overridden"),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("overrides file `overrides.toml:7`: no job is named `reports::nightyl`; did you mean `reports::nightly`?"),
            "{problems:?}"
        );
        assert!(
            problems[2].starts_with("job `reports::nightly`: overrides file `overrides.toml:3`: invalid cron expression `0 0 L-31 * *` at column 5"),
            "{problems:?}"
        );
        assert!(
            problems[3].starts_with("job `cleanup`: `max_instances = 3` needs `lock = \"local\"`")
                && problems[3].ends_with(
                    "(overridden: `max_instances = 3` from overrides file `overrides.toml:13`)"
                ),
            "{problems:?}"
        );
    }

    #[test]
    fn an_unknown_key_gets_jobconfigs_answer_with_its_line() {
        let mut all = jobs();
        let problems = apply_file(
            &mut all,
            "[[job]]\nname = \"cleanup\"\n\nleese = \"10s\"\n",
            &[],
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("overrides file `overrides.toml:4`: unknown key `leese`; did you mean `lease`? expected one of: `cron`"),
            "{problems:?}"
        );
        let problems = apply_file(&mut all, "[[jobs]]\nname = \"cleanup\"\n", &[]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("overrides file `overrides.toml:1`: unknown field `jobs`"),
            "{problems:?}"
        );
        let problems = apply_file(
            &mut all,
            "[[job]]\nname = \"cleanup\"\nretries = \"3\"\n",
            &[],
        );
        assert!(
            problems[0].starts_with("overrides file `overrides.toml:3`: invalid type"),
            "{problems:?}"
        );
        let problems = apply_file(
            &mut all,
            "[[job]]\nname = \"cleanup\"\n[[job]]\nname = \"cleanup\"\n",
            &[],
        );
        assert_eq!(
            problems,
            ["job `cleanup`: overrides file `overrides.toml:4`: the job has a table of overrides at line 2 already; merge the two tables"]
        );
    }

    #[test]
    fn a_file_that_cannot_be_read_is_an_error() {
        let mut inputs = Inputs::default();
        inputs.set_file(PathBuf::from("/nonexistent/overrides.toml"));
        let mut problems = Vec::new();
        apply(&inputs, &mut jobs(), &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind(), ProblemKind::InvalidOverride);
        assert!(
            problems[0]
                .message()
                .starts_with("overrides file `/nonexistent/overrides.toml`: cannot be read: ")
                && problems[0]
                    .message()
                    .ends_with("; give `Builder::overrides_file` the file's path"),
            "{problems:?}"
        );
    }
}

#[cfg(not(feature = "toml"))]
#[test]
fn a_file_without_the_toml_feature_is_an_error_naming_it() {
    let inputs = Inputs {
        file: Some((PathBuf::from("o.toml"), FileOrigin::Variable)),
        ..Inputs::default()
    };
    let mut problems = Vec::new();
    apply(&inputs, &mut jobs(), &mut problems);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind(), ProblemKind::MissingFeature);
    assert!(
        problems[0].message().starts_with("`CRONGUARD_OVERRIDES_FILE` names the overrides file `o.toml`, but cronguard was built without its `toml` feature"),
        "{problems:?}"
    );
}
