//! The processes present at each shared store, as the reader of its control feed last heard
//! them, so that each shared job knows whether this process claims its fires first
//! (docs/design/standby.md).

use std::sync::{Arc, PoisonError, RwLock};

use tokio::time::Instant;

use crate::guard::partitions::{partition_of, Ownership, PARTITIONS};
use crate::model::spread::{Owner, Present};

/// This process's id at the stores, who it last heard present at each, and who owns the
/// partitions of its group there (docs/design/ownership.md).
pub(crate) struct Presence {
    me: Arc<str>,
    /// By guard kind (`file`, `redis`, `postgres`): a handful, so a list.
    heard: RwLock<Vec<(&'static str, Present)>>,
    owners: RwLock<Vec<(&'static str, Owners)>>,
    /// Whether this process takes part in partition ownership ([`Builder::partition_ownership`](crate::Builder::partition_ownership)).
    owning: bool,
}

/// The partitions of this process's group at one store, as it last heard them.
struct Owners {
    /// The group's members (this process included), over which the partitions spread.
    members: Present,
    /// Per partition: whether this process owns it, and until when (monotonic) its lease holds
    /// at the latest; `None` without a live lease.
    leases: Box<[Option<(bool, Instant)>]>,
}

impl Owners {
    fn owner(&self, partition: u16, now: Instant) -> Owner {
        match self.leases.get(usize::from(partition)).copied().flatten() {
            Some((true, until)) if now < until => Owner::Here,
            Some((false, until)) if now < until => Owner::Elsewhere,
            _ => Owner::Unknown,
        }
    }
}

impl Presence {
    /// The presence of a process of `instance`: its id is the instance, the operating system's
    /// process id and a random part, so that two processes of one instance name (two on one host,
    /// or a restart) are two processes.
    pub(crate) fn new(instance: &str, owning: bool) -> Self {
        Presence {
            me: Arc::from(format!(
                "{instance} {} {:016x}",
                std::process::id(),
                fastrand::u64(..)
            )),
            heard: RwLock::new(Vec::new()),
            owners: RwLock::new(Vec::new()),
            owning,
        }
    }

    /// Whether this process takes part in partition ownership.
    pub(crate) fn owning(&self) -> bool {
        self.owning
    }

    /// This process's id at the stores.
    pub(crate) fn me(&self) -> &str {
        &self.me
    }

    /// The processes the store of guard `kind` lists as present (this one included or not), or
    /// `None` when the store could not tell: its jobs then stand by as if alone with the guard's
    /// answers (docs/design/standby.md).
    pub(crate) fn heard(&self, kind: &'static str, listed: Option<&[String]>) {
        let present = listed.map(|all| Present::new(&self.me, all));
        let mut heard = self.heard.write().unwrap_or_else(PoisonError::into_inner);
        heard.retain(|(k, _)| *k != kind);
        if let Some(present) = present {
            heard.push((kind, present));
        }
    }

    /// Whether this process claims the fires of `job` (guarded by kind `kind`) first, if known.
    pub(crate) fn first_here(&self, kind: &str, job: &str) -> Option<bool> {
        let heard = self.heard.read().unwrap_or_else(PoisonError::into_inner);
        heard
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, present)| present.first_here(job))
    }

    /// The partitions this process asks the store of guard `kind` for: those of which its
    /// group's members, as last heard, name it first (rendezvous hashing, as for the jobs
    /// themselves); none before it heard them.
    pub(crate) fn wanted(&self, kind: &str) -> Vec<u16> {
        let owners = self.owners.read().unwrap_or_else(PoisonError::into_inner);
        let Some((_, owners)) = owners.iter().find(|(k, _)| *k == kind) else {
            return Vec::new();
        };
        (0..PARTITIONS)
            .filter(|p| owners.members.first_here(&partition_key(*p)))
            .collect()
    }

    /// What the store of guard `kind` answered to a request for partitions sent at `sent`
    /// (`None`: it keeps none, or could not be read); answers the partitions this process owns
    /// now and did not own before, by the view it had.
    pub(crate) fn heard_owners(
        &self,
        kind: &'static str,
        read: Option<Ownership>,
        sent: Instant,
    ) -> Vec<u16> {
        let mut owners = self.owners.write().unwrap_or_else(PoisonError::into_inner);
        let before = owners
            .iter()
            .position(|(k, _)| *k == kind)
            .map(|i| owners.swap_remove(i).1);
        let Some(read) = read else {
            return Vec::new();
        };
        let mut leases = vec![None; usize::from(PARTITIONS)].into_boxed_slice();
        for lease in &read.leases {
            if lease.left.is_zero() {
                continue;
            }
            if let Some(slot) = leases.get_mut(usize::from(lease.partition)) {
                // From when the request was sent: the store's lease ends no earlier than that.
                *slot = Some((*lease.owner == *self.me, sent + lease.left));
            }
        }
        let now = Instant::now();
        let gained = (0..PARTITIONS)
            .filter(|p| {
                leases[usize::from(*p)].is_some_and(|(mine, _)| mine)
                    && before
                        .as_ref()
                        .is_none_or(|b| b.owner(*p, now) != Owner::Here)
            })
            .collect();
        owners.push((
            kind,
            Owners {
                members: Present::new(&self.me, &read.members),
                leases,
            },
        ));
        gained
    }

    /// Who owns the partition of `job` (guarded by kind `kind`) at `now`, as last heard.
    pub(crate) fn owner_of(&self, kind: &str, job: &str, now: Instant) -> Owner {
        let owners = self.owners.read().unwrap_or_else(PoisonError::into_inner);
        owners
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(Owner::Unknown, |(_, o)| o.owner(partition_of(job), now))
    }

    /// How many processes the store of guard `kind` lists as present, if known.
    pub(crate) fn count(&self, kind: &str) -> Option<usize> {
        let heard = self.heard.read().unwrap_or_else(PoisonError::into_inner);
        heard
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, present)| present.count())
    }
}

/// A partition as the rendezvous hashing sees it: a name no job has (a job's name has no space).
fn partition_key(partition: u16) -> String {
    format!("partition {partition}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_first_here_for_one_of_two_processes_and_unknown_without_word() {
        let a = Presence::new("a", false);
        let b = Presence::new("a", false);
        assert_ne!(a.me(), b.me(), "two processes of one instance are two");
        assert_eq!(a.first_here("redis", "job"), None);
        let both = [a.me().to_owned(), b.me().to_owned()];
        a.heard("redis", Some(&both));
        b.heard("redis", Some(&both));
        assert_eq!(a.count("redis"), Some(2));
        assert_eq!(a.first_here("postgres", "job"), None);
        let firsts = (0..100)
            .filter(|i| {
                let job = format!("job-{i}");
                let (x, y) = (a.first_here("redis", &job), b.first_here("redis", &job));
                assert_ne!(x, y);
                x == Some(true)
            })
            .count();
        assert!((30..=70).contains(&firsts), "{firsts} of 100");
        a.heard("redis", None);
        assert_eq!(a.first_here("redis", "job"), None);
    }
}
