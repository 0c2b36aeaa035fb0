//! The choices a job's settings offer: its guard and what a fire does when no slot is free.
//! A leaf module: every layer may name them.

use std::fmt;
use std::str::FromStr;

/// Which guard protects a job's fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
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
}

impl Lock {
    /// `local`, `file` or `redis`: the value of `lock = "..."`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Lock::Local => "local",
            Lock::File => "file",
            Lock::Redis => "redis",
        }
    }
}

impl fmt::Display for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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
    /// Every guard that `lock = "..."` names, in the order of the README's argument table.
    const ALL: &'static [Lock] = &[Lock::Local, Lock::File, Lock::Redis];

    /// What the guard covers, for messages.
    const fn scope(self) -> &'static str {
        match self {
            Lock::Local => "in this process",
            Lock::File => "all processes on this host",
            Lock::Redis => "all replicas of a cluster",
        }
    }

    /// The one parser of `lock` values, shared by [`FromStr`] and `Deserialize`.
    fn parse(text: &str) -> Result<Lock, ParseOptionError> {
        Lock::ALL
            .iter()
            .copied()
            .find(|lock| lock.as_str() == text)
            .ok_or_else(|| {
                ParseOptionError::new(
                    "lock",
                    text,
                    Lock::ALL.iter().map(|l| (l.as_str(), l.scope())),
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
        for lock in Lock::ALL {
            assert_eq!(lock.as_str().parse::<Lock>(), Ok(*lock));
        }
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
             `file` (all processes on this host) or `redis` (all replicas of a cluster)"
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
