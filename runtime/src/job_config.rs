//! Jobs from configuration: [`JobConfig`], the settings of `#[scheduled]` as data, checked by the
//! same code as the attribute and [`Job`] (docs/guide/attribute.md).

use std::fmt;
use std::time::Duration;

use cronguard_schedule::{parse_duration_millis, CronError, Schedule, ScheduleError};

use crate::job::Job;
use crate::options::{Lock, Overlap};

/// The settings of one job as a configuration file holds them: the arguments of `#[scheduled]`,
/// with the same names, values and defaults.
///
/// With the `serde` feature it deserializes from any format serde reads; an unknown key is
/// rejected, naming the key it probably meant. In TOML:
///
#[doc = concat!("```toml\n", include_str!("job_config.toml"), "```")]
///
/// [`JobConfig::into_job`] turns it into a [`Job`] (add its body with [`Job::run`]) after every
/// check the attribute makes at compile time: the cron expression, the time zone and the
/// durations through `cronguard-schedule` (which the macro calls too), the combinations through
/// the checks [`Builder::start`](crate::Builder::start) applies to every job. All problems are
/// reported at once.
///
/// ```
/// use cronguard::JobConfig;
///
/// let mut config = JobConfig::new("reports::nightly");
/// config.cron = Some("0 0 L-31 * *".to_owned());
/// config.lock = Some("redsi".to_owned());
/// let err = config.into_job().expect_err("two mistakes");
/// assert_eq!(err.problems().len(), 2);
/// assert_eq!(err.cron_error().and_then(|e| e.column()), Some(5));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobConfig {
    /// The job's identity in locks, logs and metrics (`name = "..."`).
    pub name: String,
    /// A cron expression (`cron = "..."`); exactly one of `cron` and `every`.
    pub cron: Option<String>,
    /// A fixed interval aligned to the Unix epoch (`every = "30s"`).
    pub every: Option<String>,
    /// The IANA time zone of `cron` (`tz = "Europe/Berlin"`); UTC when absent.
    pub tz: Option<String>,
    /// The guard: `local` (default), `file`, `redis`, `postgres` or `custom:<name>`.
    pub lock: Option<String>,
    /// The lease of a guard with leases (`lease = "10s"`).
    pub lease: Option<String>,
    /// Runs allowed at once (`local` only above 1); default 1.
    pub max_instances: Option<u32>,
    /// `skip` (default), `queue` or `replace`.
    pub overlap: Option<String>,
    /// Of several waiting fires run only the latest.
    pub coalesce: bool,
    /// How late a fire may still start (`misfire_grace = "60s"`).
    pub misfire_grace: Option<String>,
    /// Each run's deadline (`timeout = "5m"`).
    pub timeout: Option<String>,
    /// How often a failed run is tried again (`retries = 3`); default 0.
    pub retries: Option<u32>,
    /// The pause before the first retry (`backoff = "10s"`); needs `retries`.
    pub backoff: Option<String>,
    /// The spread of each fire's start (`jitter = "30s"`).
    pub jitter: Option<String>,
    /// How long a process that did not get the last fire waits before it claims (`standby =
    /// "2s"`; see [`Job::standby`]).
    pub standby: Option<String>,
    /// Whether the guard keeps the job's run history (`history`; `postgres` or a custom guard).
    pub history: bool,
    /// Whether this process fires the job (see [`Job::enabled`]); default `true`.
    pub enabled: Option<bool>,
}

impl JobConfig {
    /// Settings with only a name, every other setting at its default (and no schedule yet).
    pub fn new(name: impl Into<String>) -> Self {
        JobConfig {
            name: name.into(),
            ..JobConfig::default()
        }
    }

    /// Checks the settings and builds the [`Job`], without a body: add it with [`Job::run`] or
    /// [`Job::run_blocking`].
    ///
    /// # Errors
    ///
    /// A [`JobConfigError`] listing every problem, each saying how to fix it; a cron expression's
    /// problem carries its position ([`JobConfigError::cron_error`]).
    pub fn into_job(self) -> Result<Job, JobConfigError> {
        let name = self.name.clone();
        let mut problems = Vec::new();
        let mut cron_error = None;
        let schedule = match Schedule::from_settings(
            self.cron.as_deref(),
            self.every.as_deref(),
            self.tz.as_deref(),
        ) {
            Ok(schedule) => Some(schedule),
            Err(error) => {
                let key = match &error {
                    ScheduleError::Cron { .. } => "`cron`: ",
                    ScheduleError::TimeZone(_) => "`tz`: ",
                    ScheduleError::Interval(_) | ScheduleError::ZeroInterval => "`every`: ",
                    _ => "",
                };
                let mut problem = format!("{key}{error}");
                if let ScheduleError::Cron { expr, source } = &error {
                    problem.push_str(&pointer(expr, source));
                    cron_error = Some(source.clone());
                }
                problems.push(problem);
                None
            }
        };
        let lock = parse(&mut problems, "lock", self.lock.as_deref(), |t| {
            t.parse::<Lock>()
        });
        let overlap = parse(&mut problems, "overlap", self.overlap.as_deref(), |t| {
            t.parse::<Overlap>()
        });
        let lease = parse(&mut problems, "lease", self.lease.as_deref(), duration);
        let grace = parse(
            &mut problems,
            "misfire_grace",
            self.misfire_grace.as_deref(),
            duration,
        );
        let timeout = parse(&mut problems, "timeout", self.timeout.as_deref(), duration);
        let backoff = parse(&mut problems, "backoff", self.backoff.as_deref(), duration);
        let jitter = parse(&mut problems, "jitter", self.jitter.as_deref(), duration);
        let standby = parse(
            &mut problems,
            "standby",
            self.standby.as_deref(),
            cronguard_schedule::parse_duration_millis_or_zero,
        );
        // The combinations (`lease` without `redis`, `max_instances` with a shared guard, the
        // name, the lease's range) are the checks every job passes at start: run them now, also
        // when the schedule is invalid (on a stand-in), so that every problem is reported at once.
        // The stand-in's fires are further apart than any jitter: it adds no problem of its own.
        let checked = schedule.clone().or_else(|| {
            Schedule::every(cronguard_schedule::MAX_JITTER + Duration::from_secs(1)).ok()
        });
        if let (Some(checked), Some(lock), Some(overlap), Some(lease), Some(grace)) =
            (checked, lock, overlap, lease, grace)
        {
            let mut job = Job::new(name.clone(), checked)
                .lock(lock.unwrap_or_default())
                .overlap(overlap.unwrap_or_default())
                .max_instances(self.max_instances.unwrap_or(1))
                .coalesce(self.coalesce)
                .history(self.history)
                .misfire_grace(grace.unwrap_or(cronguard_schedule::DEFAULT_MISFIRE_GRACE))
                .enabled(self.enabled.unwrap_or(true));
            if let Some(lease) = lease {
                job = job.lease(lease);
            }
            job.retries = self.retries.unwrap_or(0);
            job.timeout = timeout.flatten();
            job.backoff = backoff.flatten();
            job.jitter = jitter.flatten();
            job.standby = standby.flatten();
            problems.extend(job.setting_problems());
            if problems.is_empty() && schedule.is_some() {
                return Ok(job);
            }
        } else if let Err(problem) = cronguard_schedule::validate_job_name(&name) {
            problems.push(problem);
        }
        Err(JobConfigError {
            job: name,
            problems,
            cron_error,
        })
    }
}

fn duration(text: &str) -> Result<Duration, cronguard_schedule::DurationError> {
    parse_duration_millis(text)
}

/// Parses an optional setting; `Some(None)` when absent, `None` (and a problem) when invalid.
fn parse<T, E: fmt::Display>(
    problems: &mut Vec<String>,
    key: &str,
    text: Option<&str>,
    parse: impl Fn(&str) -> Result<T, E>,
) -> Option<Option<T>> {
    match text.map(parse) {
        None => Some(None),
        Some(Ok(value)) => Some(Some(value)),
        Some(Err(error)) => {
            problems.push(format!("`{key}`: {error}"));
            None
        }
    }
}

/// The expression again on a line of its own, with `^` under the part at fault.
pub(crate) fn pointer(expr: &str, error: &CronError) -> String {
    let Some(span) = error.span() else {
        return String::new();
    };
    let (Some(before), Some(part)) = (expr.get(..span.start), expr.get(span.clone())) else {
        return String::new();
    };
    let shown: String = expr.chars().map(visible).collect();
    let pad: String = before
        .chars()
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    format!(
        "\n    {shown}\n    {pad}{}",
        "^".repeat(part.chars().count().max(1))
    )
}

/// Control and white-space characters other than space and tab shown as `�`-free placeholders
/// one column wide, so the caret lines up.
fn visible(c: char) -> char {
    if c == ' ' || c == '\t' || c.is_ascii_graphic() {
        c
    } else if c.is_whitespace() || c.is_control() {
        '\u{2423}' // OPEN BOX, one column: shows where the hidden character is
    } else {
        c
    }
}

/// The problems of one [`JobConfig`], all at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobConfigError {
    job: String,
    problems: Vec<String>,
    cron_error: Option<CronError>,
}

impl JobConfigError {
    /// The job's name as configured.
    pub fn job(&self) -> &str {
        &self.job
    }

    /// Every problem, each naming the setting and how to fix it.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// The cron expression's problem, with its position ([`CronError::span`],
    /// [`CronError::column`]), when the expression is at fault.
    pub fn cron_error(&self) -> Option<&CronError> {
        self.cron_error.as_ref()
    }
}

impl fmt::Display for JobConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problems.as_slice() {
            [one] => write!(f, "job `{}`: {one}", self.job),
            many => {
                write!(f, "job `{}` has {} problems:", self.job, many.len())?;
                for problem in many {
                    write!(f, "\n  - {}", problem.replace('\n', "\n    "))?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for JobConfigError {}

/// The answer to a key that is not a setting of a job, like the attribute's to an unknown
/// argument: the key it probably meant and the keys of the settings table.
pub(crate) fn unknown_key(key: &str) -> String {
    let keys = cronguard_schedule::settings::keys();
    let hint = cronguard_schedule::settings::closest(key, &keys)
        .map(|close| format!(" did you mean `{close}`?"))
        .unwrap_or_default();
    let all: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    format!(
        "unknown key `{key}`;{hint} expected one of: {}",
        all.join(", ")
    )
}

/// `Deserialize` by hand rather than derived, so that an unknown key is answered like an unknown
/// argument of the attribute: with the key it probably meant and the keys of the settings table.
#[cfg(feature = "serde")]
mod de {
    use std::fmt;

    use cronguard_schedule::settings;
    use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};

    use super::{unknown_key, JobConfig};

    impl<'de> Deserialize<'de> for JobConfig {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_map(ConfigVisitor)
        }
    }

    struct ConfigVisitor;

    impl<'de> Visitor<'de> for ConfigVisitor {
        type Value = JobConfig;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table of a job's settings: `name`, `cron` or `every`, ...")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JobConfig, A::Error> {
            let mut config = JobConfig::default();
            let mut seen: Vec<&'static str> = Vec::new();
            while let Some(Key(key)) = map.next_key()? {
                if seen.contains(&key) {
                    return Err(de::Error::duplicate_field(key));
                }
                seen.push(key);
                match key {
                    "name" => config.name = map.next_value()?,
                    "cron" => config.cron = map.next_value()?,
                    "every" => config.every = map.next_value()?,
                    "tz" => config.tz = map.next_value()?,
                    "lock" => config.lock = map.next_value()?,
                    "lease" => config.lease = map.next_value()?,
                    "history" => config.history = map.next_value()?,
                    "max_instances" => config.max_instances = map.next_value()?,
                    "overlap" => config.overlap = map.next_value()?,
                    "coalesce" => config.coalesce = map.next_value()?,
                    "misfire_grace" => config.misfire_grace = map.next_value()?,
                    "timeout" => config.timeout = map.next_value()?,
                    "retries" => config.retries = map.next_value()?,
                    "backoff" => config.backoff = map.next_value()?,
                    "jitter" => config.jitter = map.next_value()?,
                    "standby" => config.standby = map.next_value()?,
                    "enabled" => config.enabled = map.next_value()?,
                    // A key of the table that `JobConfig` does not hold; the tests prevent it.
                    other => return Err(de::Error::custom(unknown_key(other))),
                }
            }
            if !seen.contains(&"name") {
                return Err(de::Error::missing_field("name"));
            }
            Ok(config)
        }
    }

    /// A key of the settings table.
    struct Key(&'static str);

    impl<'de> Deserialize<'de> for Key {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_identifier(KeyVisitor)
        }
    }

    struct KeyVisitor;

    impl Visitor<'_> for KeyVisitor {
        type Value = Key;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the name of a job setting")
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<Key, E> {
            settings::key(text)
                .and_then(|setting| setting.key)
                .map(Key)
                .ok_or_else(|| E::custom(unknown_key(text)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(edit: impl FnOnce(&mut JobConfig)) -> JobConfig {
        let mut config = JobConfig::new("reports::nightly");
        config.cron = Some("0 30 2 * * *".to_owned());
        edit(&mut config);
        config
    }

    fn problems(config: JobConfig) -> Vec<String> {
        config
            .into_job()
            .map(|_| ())
            .expect_err("invalid")
            .problems()
            .to_vec()
    }

    use cronguard_schedule::settings;

    /// The settings of the table that configuration has and the attribute has not.
    const CONFIGURATION_ONLY: &[&str] = &["enabled"];
    /// The arguments of the attribute that are not settings of configuration.
    const ATTRIBUTE_ONLY: &[&str] = &["crate"];

    /// The fields of `JobConfig`, as its derived `Debug` names them.
    fn fields() -> Vec<String> {
        let shown = format!("{:?}", JobConfig::default());
        let inner = shown
            .strip_prefix("JobConfig { ")
            .and_then(|s| s.strip_suffix(" }"))
            .unwrap_or_else(|| panic!("not a struct: {shown}"));
        inner
            .split(", ")
            .map(|field| field.split(": ").next().unwrap_or_default().to_owned())
            .collect()
    }

    fn sorted<T: Ord>(mut items: Vec<T>) -> Vec<T> {
        items.sort();
        items
    }

    #[test]
    fn every_field_is_a_key_of_the_settings_table_and_back() {
        assert_eq!(
            sorted(fields()),
            sorted(settings::keys().into_iter().map(str::to_owned).collect())
        );
        let key_only: Vec<&str> = settings::SETTINGS
            .iter()
            .filter(|s| s.attribute.is_none())
            .filter_map(|s| s.key)
            .collect();
        assert_eq!(key_only, CONFIGURATION_ONLY);
        let attribute_only: Vec<&str> = settings::SETTINGS
            .iter()
            .filter(|s| s.key.is_none())
            .filter_map(|s| s.attribute)
            .collect();
        assert_eq!(attribute_only, ATTRIBUTE_ONLY);
    }

    /// The example of the docs sets every key once (`every` in a comment: `# or: every = ...`).
    #[test]
    fn the_documented_example_sets_every_key() {
        let keys: Vec<&str> = include_str!("job_config.toml")
            .lines()
            .flat_map(|line| [Some(line), line.split_once("# or: ").map(|(_, or)| or)])
            .filter_map(|text| text?.split_once(" = ").map(|(key, _)| key.trim()))
            .collect();
        assert_eq!(sorted(keys), sorted(settings::keys()));
    }

    /// Each value a `lock` or `overlap` key lists is one the runtime reads.
    #[test]
    fn the_choices_of_the_table_parse() {
        for (key, parses) in [
            (
                "lock",
                (|t: &str| t.parse::<Lock>().is_ok()) as fn(&str) -> bool,
            ),
            ("overlap", |t: &str| t.parse::<Overlap>().is_ok()),
        ] {
            let Some(settings::Form::OneOf(choices)) = settings::key(key).map(|s| s.form) else {
                panic!("`{key}` is one of a list");
            };
            for choice in choices {
                let written = choice.replace("<name>", "billing");
                assert!(parses(&written), "`{key} = \"{written}\"`");
            }
        }
    }

    #[test]
    fn limits_are_read_and_checked_like_the_attribute() {
        let job = config(|c| {
            c.timeout = Some("5m".to_owned());
            c.retries = Some(3);
            c.backoff = Some("10s".to_owned());
            c.jitter = Some("30s".to_owned());
            c.standby = Some("0s".to_owned());
        })
        .into_job()
        .expect("valid");
        assert_eq!(job.standby, Some(Duration::ZERO), "zero is a standby: none");
        assert_eq!(job.timeout, Some(Duration::from_secs(300)));
        assert_eq!(job.retries, 3);
        assert_eq!(job.backoff, Some(Duration::from_secs(10)));
        assert_eq!(job.jitter, Some(Duration::from_secs(30)));
        let wrong = problems(config(|c| {
            c.timeout = Some("soon".to_owned());
            c.retries = Some(500);
            c.jitter = Some("2d".to_owned());
            c.standby = Some("2h".to_owned());
        }));
        assert_eq!(wrong.len(), 4, "{wrong:?}");
        assert!(
            wrong[0].starts_with("`timeout`: `soon` is not a duration"),
            "{wrong:?}"
        );
        assert!(
            wrong[1].contains("`retries = 500` is too many; give at most 100"),
            "{wrong:?}"
        );
        assert!(
            wrong[2]
                .contains("`jitter` of 172800s is out of range; give a duration from 1ms to 24h"),
            "{wrong:?}"
        );
        assert!(
            wrong[3].contains("`standby` of 7200s is out of range; give a duration from 0s"),
            "{wrong:?}"
        );
        let backoff_alone = problems(config(|c| c.backoff = Some("10s".to_owned())));
        assert_eq!(backoff_alone.len(), 1, "{backoff_alone:?}");
        assert!(backoff_alone[0].contains("`backoff` is the pause between retries, but the job has no `retries`; add `retries = N`"), "{backoff_alone:?}");
    }

    #[test]
    fn a_jitter_as_long_as_the_gap_between_fires_is_refused_with_what_to_give() {
        let every_minute = |jitter: &str| {
            config(|c| {
                c.cron = None;
                c.every = Some("1m".to_owned());
                c.jitter = Some(jitter.to_owned());
            })
        };
        assert!(every_minute("59s").into_job().is_ok());
        let wrong = problems(every_minute("1m"));
        assert_eq!(wrong.len(), 1, "{wrong:?}");
        assert!(
            wrong[0].contains("`jitter` of 60s is not shorter than the shortest gap between two fires of the schedule (1m)")
                && wrong[0].contains("give a jitter below 1m"),
            "{wrong:?}"
        );
        let quarterly = config(|c| {
            c.cron = Some("0,15,30,45 * * * *".to_owned());
            c.jitter = Some("20m".to_owned());
        });
        assert!(problems(quarterly)[0].contains("(15m)"));
        let broken = config(|c| {
            c.cron = Some("61 * * * *".to_owned());
            c.jitter = Some("24h".to_owned());
        });
        assert_eq!(problems(broken).len(), 1, "only the cron expression");
    }

    #[test]
    fn a_valid_config_gives_the_job_of_the_attribute() {
        let job = config(|c| {
            c.tz = Some("Europe/Berlin".to_owned());
            c.lock = Some("redis".to_owned());
            c.lease = Some("10s".to_owned());
            c.overlap = Some("queue".to_owned());
            c.coalesce = true;
            c.misfire_grace = Some("10m".to_owned());
        })
        .into_job()
        .expect("valid");
        assert_eq!(job.lock, Lock::Redis);
        assert_eq!(job.lease, Some(Duration::from_secs(10)));
        assert_eq!(job.overlap, Overlap::Queue);
        assert!(job.coalesce);
        assert_eq!(job.misfire_grace, Duration::from_secs(600));
        assert_eq!(
            job.schedule().describe(),
            "at 02:30 every day (Europe/Berlin)"
        );
        let every = JobConfig {
            every: Some("30s".to_owned()),
            ..JobConfig::new("poll")
        }
        .into_job()
        .expect("valid");
        assert_eq!(every.schedule().interval(), Some(Duration::from_secs(30)));
        assert_eq!(every.lock, Lock::Local);
        assert_eq!(every.max_instances, 1);
    }

    /// Each mistake the attribute rejects at compile time is rejected here, with its reason.
    #[test]
    fn the_checks_of_the_attribute() {
        let cases: Vec<(JobConfig, &str)> = vec![
            (
                config(|c| c.cron = Some("0 0 30 2 *".to_owned())),
                "never fires",
            ),
            (
                config(|c| c.tz = Some("Europe/Berln".to_owned())),
                "did you mean `Europe/Berlin`?",
            ),
            (
                config(|c| c.every = Some("5m".to_owned())),
                "`cron` cannot be combined with `every`",
            ),
            (config(|c| c.cron = None), "missing schedule"),
            (
                JobConfig {
                    every: Some("1h".to_owned()),
                    tz: Some("UTC".to_owned()),
                    ..JobConfig::new("x")
                },
                "`tz` applies only to `cron`",
            ),
            (
                config(|c| c.lock = Some("redsi".to_owned())),
                "did you mean `redis`?",
            ),
            (
                config(|c| c.overlap = Some("drop".to_owned())),
                "unknown overlap policy `drop`",
            ),
            (
                config(|c| c.lease = Some("10s".to_owned())),
                "`lease` applies only to guards with leases",
            ),
            (
                config(|c| {
                    c.lock = Some("redis".to_owned());
                    c.lease = Some("10ms".to_owned());
                }),
                "from 100ms to 24h",
            ),
            (
                config(|c| {
                    c.lock = Some("file".to_owned());
                    c.max_instances = Some(2);
                }),
                "`max_instances = 2` needs `lock = \"local\"`",
            ),
            (
                config(|c| c.max_instances = Some(0)),
                "`max_instances` is 0",
            ),
            (
                config(|c| {
                    c.lock = Some("file".to_owned());
                    c.history = true;
                }),
                "`history` needs a guard that keeps run history",
            ),
            (
                config(|c| c.lock = Some("custom:".to_owned())),
                "needs the name",
            ),
            (
                config(|c| c.misfire_grace = Some("0s".to_owned())),
                "is zero",
            ),
            (
                config(|c| c.misfire_grace = Some("500us".to_owned())),
                "shorter than 1ms",
            ),
            (
                config(|c| c.misfire_grace = Some("1500us".to_owned())),
                "write `1ms` or `2ms`",
            ),
            (
                config(|c| c.misfire_grace = Some("soon".to_owned())),
                "is not a duration",
            ),
            (config(|c| c.name = "a b".to_owned()), "invalid job name"),
            (config(|c| c.name = String::new()), "the job name is empty"),
        ];
        for (config, expected) in cases {
            let problems = problems(config.clone());
            assert_eq!(problems.len(), 1, "{config:?}: {problems:?}");
            assert!(problems[0].contains(expected), "{config:?}: {problems:?}");
        }
    }

    #[test]
    fn every_problem_at_once_and_the_position_in_the_expression() {
        let err = config(|c| {
            c.cron = Some("0 0 L-31 * *".to_owned());
            c.lock = Some("redsi".to_owned());
            c.misfire_grace = Some("soon".to_owned());
        })
        .into_job()
        .map(|_| ())
        .expect_err("three mistakes");
        assert_eq!(err.problems().len(), 3, "{err}");
        let cron = err.cron_error().expect("the expression is at fault");
        assert_eq!((cron.column(), cron.span()), (Some(5), Some(4..8)));
        let shown = err.to_string();
        assert!(
            shown.starts_with("job `reports::nightly` has 3 problems:\n  - `cron`: invalid cron expression `0 0 L-31 * *` at column 5: `L-31`"),
            "{shown}"
        );
        assert!(
            shown.contains("\n        0 0 L-31 * *\n            ^^^^\n"),
            "{shown}"
        );
    }

    #[test]
    fn a_hidden_character_is_shown_where_it_is() {
        let err = config(|c| c.cron = Some("0 0\u{a0}* * *".to_owned()))
            .into_job()
            .map(|_| ())
            .expect_err("no-break space");
        let shown = err.to_string();
        assert!(
            shown.contains("at column 4: U+00A0 NO-BREAK SPACE"),
            "{shown}"
        );
        assert!(
            shown.ends_with("\n    0 0\u{2423}* * *\n       ^"),
            "{shown}"
        );
    }
}
