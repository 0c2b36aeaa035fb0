//! The choices a job's settings offer: its guard and what a fire does when no slot is free.
//! A leaf module: every layer may name them.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Which guard protects a job's fires.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Lock {
    /// In-process: `max_instances` at once, each fire once, in this process only.
    #[default]
    Local,
    /// `flock` on a file in the lock dir: one run at a time, each fire once, across every process
    /// of one host.
    File,
    /// Redis: one run at a time, each fire once, across a cluster.
    Redis,
    /// PostgreSQL: one run at a time, each fire once, across a cluster, with run history.
    Postgres,
    /// A guard of the application's own, registered under this name with
    /// [`Builder::custom_guard`](crate::Builder::custom_guard) (`lock = "custom:<name>"`).
    Custom(Arc<str>),
}

impl Lock {
    /// The guard a job names with `lock = "custom:<name>"`.
    pub fn custom(name: impl Into<Arc<str>>) -> Self {
        Lock::Custom(name.into())
    }

    /// `local`, `file`, `redis`, `postgres` or `custom`: the guard's kind, as metrics label it.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Lock::Local => "local",
            Lock::File => "file",
            Lock::Redis => "redis",
            Lock::Postgres => "postgres",
            Lock::Custom(_) => "custom",
        }
    }

    /// Whether runs hold an expiring lease in a store shared by a cluster (`redis`, `postgres`
    /// and custom guards), so that `lease` applies.
    pub const fn has_lease(&self) -> bool {
        matches!(self, Lock::Redis | Lock::Postgres | Lock::Custom(_))
    }
}

impl fmt::Display for Lock {
    /// The value of `lock = "..."`: `local`, `file`, `redis`, `postgres` or `custom:<name>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lock::Custom(name) => write!(f, "custom:{name}"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// What a fire does when no instance slot is free (`overlap = "..."`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Overlap {
    /// Drop the fire now; it is reported as `skipped`.
    #[default]
    Skip,
    /// Let the fire wait for a slot until its misfire grace runs out.
    Queue,
    /// Cancel the oldest running instance (through its [`JobContext`](crate::JobContext)) and start this fire when
    /// its slot is free.
    Replace,
}

impl Lock {
    /// Every guard that `lock = "..."` names by a fixed word, in the order of the `lock`
    /// row of the attribute's table, `docs/guide/attribute.md` (custom guards are `custom:<name>`).
    const NAMED: &'static [Lock] = &[Lock::Local, Lock::File, Lock::Redis, Lock::Postgres];

    /// What the guard covers, for messages.
    const fn scope(&self) -> &'static str {
        match self {
            Lock::Local => "in this process",
            Lock::File => "all processes on this host",
            Lock::Redis | Lock::Postgres => "all replicas of a cluster",
            Lock::Custom(_) => "a guard registered with `Builder::custom_guard`",
        }
    }

    /// The one parser of `lock` values, shared by [`FromStr`] and `Deserialize`: a fixed word,
    /// or `custom:<name>` with a name of ASCII letters, digits, `_`, `-` and `.` (the rule the
    /// attribute applies).
    fn parse(text: &str) -> Result<Lock, ParseOptionError> {
        if let Some(name) = text.strip_prefix("custom:") {
            let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
            return if !name.is_empty() && name.chars().all(plain) {
                Ok(Lock::custom(name))
            } else {
                Err(ParseOptionError {
                    message: format!(
                        "`custom:<name>` needs the name the guard was registered under with `Builder::custom_guard` after `custom:`, made of ASCII letters, digits, `_`, `-` and `.`; `{name}` is not such a name"
                    ),
                })
            };
        }
        Lock::NAMED
            .iter()
            .find(|lock| lock.as_str() == text)
            .cloned()
            .ok_or_else(|| {
                ParseOptionError::new(
                    "lock",
                    text,
                    Lock::NAMED
                        .iter()
                        .map(|l| (l.as_str(), l.scope()))
                        .chain([("custom:<name>", Lock::Custom(Arc::from("")).scope())]),
                )
            })
    }
}

impl Overlap {
    /// Every policy that `overlap = "..."` names.
    const ALL: &'static [Overlap] = &[Overlap::Skip, Overlap::Queue, Overlap::Replace];

    /// `skip`, `queue` or `replace`: the value of `overlap = "..."`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Queue => "queue",
            Overlap::Replace => "replace",
        }
    }

    /// What the policy does, for messages.
    const fn effect(self) -> &'static str {
        match self {
            Overlap::Skip => "drop the fire",
            Overlap::Queue => "wait for a free slot",
            Overlap::Replace => "cancel the oldest running instance",
        }
    }

    /// The one parser of `overlap` values, shared by [`FromStr`] and `Deserialize`.
    fn parse(text: &str) -> Result<Overlap, ParseOptionError> {
        Overlap::ALL
            .iter()
            .copied()
            .find(|overlap| overlap.as_str() == text)
            .ok_or_else(|| {
                ParseOptionError::new(
                    "overlap policy",
                    text,
                    Overlap::ALL.iter().map(|o| (o.as_str(), o.effect())),
                )
            })
    }
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses `local`, `file` or `redis`, as written in `lock = "..."`.
impl FromStr for Lock {
    type Err = ParseOptionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Lock::parse(text)
    }
}

/// Parses `skip`, `queue` or `replace`, as written in `overlap = "..."`.
impl FromStr for Overlap {
    type Err = ParseOptionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Overlap::parse(text)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Lock {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Lock::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Overlap {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Overlap::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A `lock` or `overlap` value that names none of the choices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseOptionError {
    message: String,
}

impl ParseOptionError {
    fn new<'a>(
        setting: &str,
        given: &str,
        choices: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        let choices: Vec<(&str, &str)> = choices.collect();
        let close = choices
            .iter()
            .map(|(name, _)| *name)
            .find(|name| name.eq_ignore_ascii_case(given.trim()) || typo(name, given))
            .map(|name| format!(" did you mean `{name}`?"))
            .unwrap_or_default();
        let listed: Vec<String> = choices
            .iter()
            .map(|(name, what)| format!("`{name}` ({what})"))
            .collect();
        let listed = match listed.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => listed.join(""),
        };
        ParseOptionError {
            message: format!("unknown {setting} `{given}`;{close} expected one of: {listed}"),
        }
    }
}

/// One letter changed, added, removed or two swapped.
fn typo(name: &str, given: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (name.chars().collect(), given.chars().collect());
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            current[j + 1] = (previous[j] + usize::from(ca != cb))
                .min(previous[j + 1] + 1)
                .min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()] <= 2 && b.len() > 2
}

impl fmt::Display for ParseOptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ParseOptionError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_choice_parses_back_from_its_name() {
        for lock in Lock::NAMED {
            assert_eq!(lock.as_str().parse::<Lock>().as_ref(), Ok(lock));
        }
        assert_eq!("custom:etcd".parse::<Lock>(), Ok(Lock::custom("etcd")));
        assert_eq!(
            "custom:etcd".parse::<Lock>().map(|l| l.to_string()),
            Ok("custom:etcd".to_owned())
        );
        let err = "custom:".parse::<Lock>().expect_err("no name");
        assert!(err.to_string().contains("needs the name"), "{err}");
        let err = "custom:a/b".parse::<Lock>().expect_err("bad name");
        assert!(
            err.to_string().contains("`a/b` is not such a name"),
            "{err}"
        );
        for overlap in Overlap::ALL {
            assert_eq!(overlap.as_str().parse::<Overlap>(), Ok(*overlap));
        }
    }

    #[test]
    fn unknown_choices_name_the_valid_ones() {
        let err = "redsi".parse::<Lock>().expect_err("typo");
        assert_eq!(
            err.to_string(),
            "unknown lock `redsi`; did you mean `redis`? expected one of: `local` (in this process), \
             `file` (all processes on this host), `redis` (all replicas of a cluster), `postgres` \
             (all replicas of a cluster) or `custom:<name>` (a guard registered with \
             `Builder::custom_guard`)"
        );
        let err = "Queue".parse::<Overlap>().expect_err("case");
        assert!(err.to_string().contains("did you mean `queue`?"), "{err}");
        let err = "drop".parse::<Overlap>().expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "unknown overlap policy `drop`; expected one of: `skip` (drop the fire), `queue` \
             (wait for a free slot) or `replace` (cancel the oldest running instance)"
        );
    }
}
