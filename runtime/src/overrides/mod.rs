//! Overrides of jobs' settings at start (docs/guide/overrides.md): environment variables
//! `CRONGUARD_JOB__<JOB>__<KEY>` and an overrides file (feature `toml`) change the schedule,
//! `enabled` and the limits of jobs declared with `#[scheduled]` (or built in code) without a
//! new build. Every value goes through the checks of the attribute, and each job keeps where its
//! overridden settings came from, for its status.

#[cfg(feature = "toml")]
mod file;
#[cfg(test)]
mod tests;
mod variables;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use cronguard_schedule::settings;
use cronguard_schedule::Schedule;

use crate::error::{Problem, ProblemKind};
use crate::job::Job;
use crate::options::Overlap;

pub(crate) mod applied;
pub use applied::{OverrideSource, SettingOverride};
pub use variables::override_variable;
pub(crate) use variables::FILE_VARIABLE;

/// What the builder gathered for the overrides, read at start.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inputs {
    /// The `CRONGUARD_JOB__*` variables (and the misspelt ones, to refuse them), in the order
    /// given.
    vars: Vec<(String, String)>,
    /// Variables with the prefix whose name or value is not UTF-8, by their name (lossy).
    unreadable: Vec<String>,
    /// The overrides file, and whether `CRONGUARD_OVERRIDES_FILE` named it.
    file: Option<(PathBuf, FileOrigin)>,
}

/// Who named the overrides file, for the messages about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileOrigin {
    /// `CRONGUARD_OVERRIDES_FILE`.
    Variable,
    /// `Builder::overrides_file`.
    Builder,
}

impl Inputs {
    /// The `CRONGUARD_JOB__*` variables and `CRONGUARD_OVERRIDES_FILE` of the process
    /// environment.
    pub(crate) fn from_env() -> Self {
        let mut inputs = Inputs::default();
        for (name, value) in std::env::vars_os() {
            if !variables::is_override(&name.to_string_lossy()) {
                continue;
            }
            match (name.into_string(), value.into_string()) {
                (Ok(name), Ok(value)) => inputs.vars.push((name, value)),
                (name, _) => inputs.unreadable.push(match name {
                    Ok(name) => name,
                    Err(name) => name.to_string_lossy().into_owned(),
                }),
            }
        }
        if let Some(path) = std::env::var_os(FILE_VARIABLE).filter(|p| !p.is_empty()) {
            inputs.file = Some((PathBuf::from(path), FileOrigin::Variable));
        }
        inputs
    }

    /// Takes the `CRONGUARD_JOB__*` entries of `vars` instead of the environment's.
    pub(crate) fn set_vars(&mut self, vars: impl IntoIterator<Item = (String, String)>) {
        self.vars = vars
            .into_iter()
            .filter(|(name, _)| variables::is_override(name))
            .collect();
        self.unreadable.clear();
    }

    /// Reads the overrides from `path` instead of `CRONGUARD_OVERRIDES_FILE`.
    #[cfg_attr(not(feature = "toml"), allow(dead_code))]
    pub(crate) fn set_file(&mut self, path: PathBuf) {
        self.file = Some((path, FileOrigin::Builder));
    }

    fn is_empty(&self) -> bool {
        self.vars.is_empty() && self.unreadable.is_empty() && self.file.is_none()
    }
}

/// A setting's value as an override gives it, of the kind the settings table says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// A string: a cron expression, a time zone, a duration, an overlap policy.
    Text(String),
    /// A whole number (`max_instances`, `retries`).
    Count(u32),
    /// `true` or `false` (`enabled`, `coalesce`, `history`).
    Bool(bool),
    /// A blank variable: it sets nothing, but must still name a job.
    Blank,
}

impl Value {
    /// The value as written, for the status.
    fn shown(&self) -> String {
        match self {
            Value::Text(text) => text.clone(),
            Value::Count(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Blank => String::new(),
        }
    }
}

/// Which job an override names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// Its name, exactly, and where the name is written (a table of the overrides file).
    #[cfg_attr(not(feature = "toml"), allow(dead_code))]
    Name(String, OverrideSource),
    /// Its name as a variable writes it (`REPORTS__NIGHTLY`).
    Variable(String),
}

/// One override as read, before it is matched with a job.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) target: Target,
    /// A key of the settings table that may be overridden.
    pub(crate) key: &'static str,
    pub(crate) value: Value,
    pub(crate) source: OverrideSource,
}

/// The settings that cannot be overridden, with why and what to do instead.
pub(crate) fn refused(key: &str) -> Option<&'static str> {
    match key {
        "lock" => Some(
            "`lock` cannot be overridden: the guard decides across which processes each fire starts at most once, and replicas that disagreed on it could each run the same fire; change `lock` in the code and deploy every replica with it",
        ),
        "name" => Some(
            "`name` cannot be overridden: it is the job's identity in locks, the guard's store and metrics, and what names the job here; rename the job in the code",
        ),
        _ => None,
    }
}

/// A problem of an override, naming the job (when known) and the source.
fn problem(job: Option<&str>, source: &str, message: impl fmt::Display) -> Problem {
    let text = match job {
        Some(job) => format!("job `{job}`: {source}: {message}"),
        None => format!("{source}: {message}"),
    };
    Problem::new(ProblemKind::InvalidOverride, job, text)
}

/// Reads the overrides and applies them to `jobs`, reporting every problem.
pub(crate) fn apply(inputs: &Inputs, jobs: &mut [Job], problems: &mut Vec<Problem>) {
    if inputs.is_empty() {
        return;
    }
    let mut entries = Vec::new();
    if let Some((path, origin)) = &inputs.file {
        read_file(path, *origin, &mut entries, problems);
    }
    for name in &inputs.unreadable {
        problems.push(problem(
            None,
            &format!("environment variable `{name}`"),
            "its name or value is not valid UTF-8; write the override in plain text, or unset the variable",
        ));
    }
    // After the file's: for a setting that both give, the variable's value wins.
    variables::read(&inputs.vars, &mut entries, problems);
    if entries.is_empty() {
        return;
    }
    let mut per_job: BTreeMap<usize, Vec<Entry>> = BTreeMap::new();
    let index = JobIndex::new(jobs);
    // A table of the file that names no job is reported once, not once per key.
    let mut unknown: Vec<&Target> = Vec::new();
    for entry in &entries {
        match index.resolve(entry) {
            Ok(_) if entry.value == Value::Blank => {}
            Ok(found) => {
                for &i in found {
                    per_job.entry(i).or_default().push(entry.clone());
                }
            }
            Err(message) => {
                // Each variable is its own mistake; a table is one, however many keys it has.
                let at = match &entry.target {
                    Target::Name(..) if unknown.contains(&&entry.target) => continue,
                    Target::Name(_, at) => at,
                    Target::Variable(_) => &entry.source,
                };
                unknown.push(&entry.target);
                problems.push(problem(None, &at.to_string(), message));
            }
        }
    }
    for (i, entries) in per_job {
        if let Some(job) = jobs.get_mut(i) {
            apply_to(job, entries, problems);
        }
    }
}

#[cfg(feature = "toml")]
fn read_file(
    path: &std::path::Path,
    origin: FileOrigin,
    entries: &mut Vec<Entry>,
    problems: &mut Vec<Problem>,
) {
    file::read(path, origin, entries, problems);
}

#[cfg(not(feature = "toml"))]
fn read_file(
    path: &std::path::Path,
    origin: FileOrigin,
    _entries: &mut Vec<Entry>,
    problems: &mut Vec<Problem>,
) {
    let named = match origin {
        FileOrigin::Variable => format!("`{FILE_VARIABLE}` names the overrides file"),
        FileOrigin::Builder => "an overrides file is given".to_owned(),
    };
    problems.push(Problem::new(
        ProblemKind::MissingFeature,
        None,
        format!(
            "{named} `{}`, but cronguard was built without its `toml` feature, which reads it; enable it (`cronguard = {{ version = \"0.1\", features = [\"toml\"] }}`) or unset `{FILE_VARIABLE}`",
            path.display()
        ),
    ));
}

/// The jobs by their exact name and by their name as a variable writes it.
struct JobIndex<'a> {
    by_name: HashMap<&'a str, Vec<usize>>,
    /// The variable form of each name, with the distinct names that give it.
    by_form: HashMap<String, (Vec<&'a str>, Vec<usize>)>,
}

impl<'a> JobIndex<'a> {
    fn new(jobs: &'a [Job]) -> Self {
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut by_form: HashMap<String, (Vec<&str>, Vec<usize>)> = HashMap::new();
        for (i, job) in jobs.iter().enumerate() {
            by_name.entry(job.name()).or_default().push(i);
            let (names, indices) = by_form.entry(variables::job_form(job.name())).or_default();
            if !names.contains(&job.name()) {
                names.push(job.name());
            }
            indices.push(i);
        }
        JobIndex { by_name, by_form }
    }

    /// The jobs an override applies to, or why it applies to none.
    fn resolve(&self, entry: &Entry) -> Result<&[usize], String> {
        match &entry.target {
            Target::Name(name, _) => self
                .by_name
                .get(name.as_str())
                .map(Vec::as_slice)
                .ok_or_else(|| self.no_such_name(name)),
            Target::Variable(form) => match self.by_form.get(form) {
                Some((names, indices)) if names.len() == 1 => Ok(indices),
                Some((names, _)) => Err(format!(
                    "names more than one job: {} are all written `{form}` in a variable's name; override them in an overrides file, whose `name = \"...\"` names a job exactly, or rename all but one",
                    quoted(names)
                )),
                None => Err(self.no_such_form(form, entry.key)),
            },
        }
    }

    fn no_such_name(&self, name: &str) -> String {
        let names: Vec<&str> = self.by_name.keys().copied().collect();
        let hint = closest(name, &names)
            .map(|close| format!(" did you mean `{close}`?"))
            .unwrap_or_else(|| listed(&names));
        format!(
            "no job is named `{name}`;{hint} An override must name a job of this binary exactly, so that a typo never goes unnoticed"
        )
    }

    fn no_such_form(&self, form: &str, key: &str) -> String {
        let forms: Vec<&str> = self.by_form.keys().map(String::as_str).collect();
        let hint = match closest(form, &forms).and_then(|f| Some((f, self.by_form.get(f)?))) {
            Some((close, (names, _))) => format!(
                " did you mean `{}` (job `{}`)?",
                variables::variable(close, key),
                names.first().copied().unwrap_or_default()
            ),
            None => {
                let names: Vec<&str> = self.by_name.keys().copied().collect();
                listed(&names)
            }
        };
        format!(
            "no job's name is written `{form}`;{hint} A variable writes a job's name in capitals with `_` for every other character than a letter or digit (`reports::nightly` is `REPORTS__NIGHTLY`)"
        )
    }
}

/// The candidate `unknown` was probably meant to be, ignoring case.
fn closest<'a>(unknown: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower: Vec<String> = candidates.iter().map(|c| c.to_lowercase()).collect();
    let refs: Vec<&str> = lower.iter().map(String::as_str).collect();
    let found = settings::closest(&unknown.to_lowercase(), &refs)?;
    let at = refs.iter().position(|r| *r == found)?;
    candidates.get(at).copied()
}

/// "`a`, `b`" for messages.
fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// " the jobs are `a`, `b`." (the first ten, sorted), or " there are no jobs." for messages.
fn listed(names: &[&str]) -> String {
    const SHOWN: usize = 10;
    let mut sorted = names.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return " this binary has no jobs.".to_owned();
    }
    let more = sorted.len().saturating_sub(SHOWN);
    sorted.truncate(SHOWN);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(" the jobs are {}{more}.", quoted(&sorted))
}

/// Applies the overrides of one job, each checked as the attribute checks its argument; a value
/// that fails is reported and not applied. The combinations (`max_instances` with a shared guard,
/// `backoff` without `retries`, a jitter against the new schedule) are checked with every other
/// job's settings by `start()`.
fn apply_to(job: &mut Job, mut entries: Vec<Entry>, problems: &mut Vec<Problem>) {
    // For a setting given twice (the file, then a variable) the later wins.
    let mut latest: Vec<Entry> = Vec::new();
    for entry in entries.drain(..) {
        match latest.iter_mut().find(|e| e.key == entry.key) {
            Some(earlier) => {
                tracing::info!(job = %job.name(), setting = entry.key, earlier = %earlier.source, later = %entry.source, "a job's setting is overridden twice; the later value applies");
                *earlier = entry;
            }
            None => latest.push(entry),
        }
    }
    let order = |key: &str| settings::SETTINGS.iter().position(|s| s.key == Some(key));
    latest.sort_by_key(|e| order(e.key));
    let name = job.name().to_owned();
    let mut applied = Vec::new();
    let fail = |problems: &mut Vec<Problem>, entry: &Entry, message: String| {
        problems.push(problem(Some(&name), &entry.source.to_string(), message));
    };
    let schedule: Vec<&Entry> = latest
        .iter()
        .filter(|e| matches!(e.key, "cron" | "every" | "tz"))
        .collect();
    if !schedule.is_empty() {
        match new_schedule(&job.schedule, &schedule) {
            Ok(new) => {
                job.schedule = new;
                applied.extend(schedule.iter().map(|e| record(e)));
            }
            Err(failures) => {
                for (entry, message) in failures {
                    fail(problems, entry, message);
                }
            }
        }
    }
    for entry in latest
        .iter()
        .filter(|e| !matches!(e.key, "cron" | "every" | "tz"))
    {
        match set(job, entry) {
            Ok(()) => applied.push(record(entry)),
            Err(message) => fail(problems, entry, message),
        }
    }
    for one in &applied {
        tracing::info!(job = %name, setting = %one.setting, value = %one.value, source = %one.source, "a setting of the job is overridden");
    }
    if !applied.is_empty() {
        job.overrides = Some(applied.into());
    }
}

fn record(entry: &Entry) -> SettingOverride {
    SettingOverride {
        setting: entry.key.to_owned(),
        value: entry.value.shown(),
        source: entry.source.clone(),
    }
}

/// The schedule with the overrides of `cron`, `every` and `tz`: an override of `cron` keeps the
/// job's time zone unless `tz` is overridden too; an override of `every` replaces a cron schedule
/// with its time zone, and one of `cron` an interval.
fn new_schedule<'e>(
    current: &Schedule,
    entries: &[&'e Entry],
) -> Result<Schedule, Vec<(&'e Entry, String)>> {
    let get = |key: &str| {
        entries.iter().copied().find_map(|e| match &e.value {
            Value::Text(text) if e.key == key => Some((e, text.as_str())),
            _ => None,
        })
    };
    let (cron, every, tz) = (get("cron"), get("every"), get("tz"));
    let mut failures = Vec::new();
    if let Some((entry, expr)) = cron {
        if let Err(error) = cronguard_schedule::validate_cron(expr) {
            let pointer = crate::job_config::pointer(expr, &error);
            failures.push((entry, format!("{}{pointer}", error.message_for(expr))));
        }
    }
    if let Some((entry, zone)) = tz {
        if let Err(error) = cronguard_schedule::parse_time_zone(zone) {
            failures.push((entry, error.to_string()));
        }
    }
    let interval = match every {
        Some((entry, text)) => match cronguard_schedule::parse_duration_millis(text) {
            Ok(interval) => Some(interval),
            Err(error) => {
                failures.push((entry, error.to_string()));
                None
            }
        },
        None => None,
    };
    if let (Some((cron_entry, _)), Some((every_entry, _))) = (cron, every) {
        failures.push((
            every_entry,
            format!(
                "{}; the other is `cron` from {}: give one of them",
                cronguard_schedule::ScheduleError::CronAndEvery,
                cron_entry.source
            ),
        ));
    }
    if !failures.is_empty() {
        return Err(failures);
    }
    let current_cron = current.cron_expr().map(|c| c.as_str().to_owned());
    let is_cron = match (cron, every) {
        (Some(_), _) => true,
        (None, Some(_)) => false,
        (None, None) => current_cron.is_some(),
    };
    let built = if is_cron {
        // An override of `cron` alone keeps the job's zone; one of `tz` alone its expression.
        let expr = cron.map(|(_, expr)| expr.to_owned()).or(current_cron);
        let zone = match tz {
            Some((_, zone)) => cronguard_schedule::parse_time_zone(zone).ok(),
            None => current.time_zone(),
        };
        match (expr, zone) {
            (Some(expr), Some(zone)) => Schedule::cron_in(&expr, zone),
            (Some(expr), None) => Schedule::cron(&expr, "UTC"),
            (None, _) => return Err(Vec::new()),
        }
    } else {
        if let Some((entry, _)) = tz {
            let message = format!(
                "{}; the job's schedule is `every`{}",
                cronguard_schedule::ScheduleError::TimeZoneWithEvery,
                every
                    .map(|(e, _)| format!(" from {}", e.source))
                    .unwrap_or_default()
            );
            return Err(vec![(entry, message)]);
        }
        match interval.or_else(|| current.interval()) {
            Some(interval) => Schedule::every(interval),
            None => return Err(Vec::new()),
        }
    };
    built.map_err(|error| {
        let culprit = cron.or(every).or(tz).map(|(entry, _)| entry);
        culprit
            .map(|entry| vec![(entry, error.to_string())])
            .unwrap_or_default()
    })
}

/// Sets one setting other than the schedule, after the attribute's check of its value.
fn set(job: &mut Job, entry: &Entry) -> Result<(), String> {
    let key = entry.key;
    match &entry.value {
        Value::Bool(on) => match key {
            "enabled" => job.enabled = *on,
            "coalesce" => job.coalesce = *on,
            "history" => job.history = *on,
            _ => return Err(not_overridable(key)),
        },
        Value::Count(n) => match key {
            "max_instances" if *n == 0 => {
                return Err("`max_instances` must be at least 1; it is the number of runs of this job allowed at once".to_owned());
            }
            "max_instances" => job.max_instances = *n,
            "retries" => {
                cronguard_schedule::check_retries(*n)
                    .map_err(|range| format!("`retries = {n}` {range}"))?;
                job.retries = *n;
            }
            _ => return Err(not_overridable(key)),
        },
        Value::Text(text) => match key {
            "overlap" => job.overlap = text.parse::<Overlap>().map_err(|e| e.to_string())?,
            "misfire_grace" => job.misfire_grace = duration(text)?,
            "lease" => {
                let lease = duration(text)?;
                cronguard_schedule::check_lease(lease)
                    .map_err(|range| format!("`lease = \"{text}\"` {range}"))?;
                job.lease = Some(lease);
            }
            "standby" => {
                let standby = cronguard_schedule::parse_duration_millis_or_zero(text)
                    .map_err(|e| e.to_string())?;
                cronguard_schedule::check_standby(standby)
                    .map_err(|range| format!("`standby = \"{text}\"` {range}"))?;
                job.standby = Some(standby);
            }
            "timeout" => job.timeout = Some(limit(key, text, cronguard_schedule::check_timeout)?),
            "backoff" => job.backoff = Some(limit(key, text, cronguard_schedule::check_backoff)?),
            "jitter" => job.jitter = Some(limit(key, text, cronguard_schedule::check_jitter)?),
            _ => return Err(not_overridable(key)),
        },
        Value::Blank => return Err(format!("`{key}` is blank")),
    }
    Ok(())
}

/// A duration of whole milliseconds, as the attribute reads one.
fn duration(text: &str) -> Result<Duration, String> {
    cronguard_schedule::parse_duration_millis(text).map_err(|e| e.to_string())
}

/// A duration within the range the attribute allows for `key`.
fn limit(
    key: &str,
    text: &str,
    check: fn(Duration) -> Result<(), String>,
) -> Result<Duration, String> {
    let value = duration(text)?;
    check(value).map_err(|range| format!("`{key} = \"{text}\"` {range}"))?;
    Ok(value)
}

fn not_overridable(key: &str) -> String {
    refused(key).map_or_else(
        || format!("`{key}` cannot be overridden with this value"),
        str::to_owned,
    )
}
