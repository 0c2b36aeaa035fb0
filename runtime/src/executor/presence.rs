//! The processes present at each shared store, as the reader of its control feed last heard
//! them, so that each shared job knows whether this process claims its fires first
//! (docs/design/standby.md).

use std::sync::{Arc, PoisonError, RwLock};

use chrono::{DateTime, Utc};
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
    /// This process's clock agreed with the store's: it may own partitions.
    may_own: bool,
    /// Per partition without a live lease `None`, else the lease as heard.
    leases: Box<[Option<Heard>]>,
    /// When the store last answered a request for the partitions, or the request failed.
    asked: Instant,
}

/// One partition's live lease as this process heard it.
#[derive(Clone, Copy)]
struct Heard {
    /// The owner and the epoch, as one key: a change of either is a change of owner.
    key: u64,
    /// Whether this process is the owner (and may own).
    mine: bool,
    /// Until when (monotonic) the lease holds at the latest.
    until: Instant,
    /// Since when, on the store's clock, the owner holds it: its epoch, which is the store's
    /// clock in µs when it took the partition (or just above the epoch before).
    since: Option<DateTime<Utc>>,
    /// When the owner sent its last renewal, on its own clock (within a second of the store's:
    /// a process further off owns nothing).
    renewed: Option<DateTime<Utc>>,
}

impl Owners {
    /// The lease of `partition` if it holds at `now`: until it runs out by this process's clock
    /// — or, another process's lease, until the store was asked again after that. A process
    /// frozen or suspended past the leases it heard finds them run out when it wakes, before it
    /// could ask; its fires are left to the owner it knew until the store says whether that owner
    /// renewed, so that it neither claims the owner's fires nor walks the fires it left (the guard
    /// may have forgotten their claims by then) unless the owner changed.
    fn live(&self, partition: u16, now: Instant) -> Option<Heard> {
        self.leases
            .get(usize::from(partition))
            .copied()
            .flatten()
            .filter(|h| now < h.until || (!h.mine && self.asked < h.until))
    }

    /// Who owns `partition` at `now` for the fires from `next` on: a fire that came due before
    /// its owner took the partition may not be that owner's (it started after the fire, say, and
    /// the store held no record of the job to walk from), so it is not left to it.
    fn owner(&self, partition: u16, now: Instant, next: Option<DateTime<Utc>>) -> Owner {
        match self.live(partition, now) {
            Some(h) if h.mine => Owner::Here,
            Some(h)
                if h.since
                    .is_some_and(|since| next.is_some_and(|t| since <= t)) =>
            {
                Owner::Elsewhere
            }
            _ => Owner::Unknown,
        }
    }
}

/// How far this process's clock may be off the store's for it to own partitions: an owner whose
/// clock is behind would claim its fires late, or, hours behind, not at all, while the others
/// leave them to it (docs/design/ownership.md).
pub(crate) const OWNER_CLOCK_TOLERANCE: std::time::Duration = std::time::Duration::from_secs(1);

/// How long after a departed owner's lease runs out (by this process's reckoning) it asks for the
/// partition: the stores compare expiries in whole milliseconds.
const TAKE_OVER_MARGIN: std::time::Duration = std::time::Duration::from_millis(10);

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
    /// themselves); none before it heard them, or while its clock is off the store's.
    pub(crate) fn wanted(&self, kind: &str) -> Vec<u16> {
        let owners = self.owners.read().unwrap_or_else(PoisonError::into_inner);
        let Some((_, owners)) = owners.iter().find(|(k, _)| *k == kind) else {
            return Vec::new();
        };
        if !owners.may_own {
            return Vec::new();
        }
        (0..PARTITIONS)
            .filter(|p| owners.members.first_here(&partition_key(*p)))
            .collect()
    }

    /// When to ask the store again, before the next read, to take over the partitions this
    /// process is now named first for whose owner left the group (it no longer asks for
    /// partitions, so its leases are not renewed): just after the first of those leases runs out,
    /// counted from `answered`, when the store's answer `read` came (it ran out no later). So a
    /// stopped owner's partitions are owned again one lease after its last renewal, not up to a
    /// read later (docs/design/ownership.md). `None` when there is none, or `may_own` is false.
    pub(crate) fn take_over_at(
        &self,
        read: &Ownership,
        may_own: bool,
        answered: Instant,
    ) -> Option<Instant> {
        if !may_own {
            return None;
        }
        let members = Present::new(&self.me, &read.members);
        read.leases
            .iter()
            .filter(|l| !l.left.is_zero() && *l.owner != *self.me)
            .filter(|l| !read.members.contains(&l.owner))
            .filter(|l| members.first_here(&partition_key(l.partition)))
            .map(|l| answered + l.left + TAKE_OVER_MARGIN)
            .min()
    }

    /// What the store of guard `kind` answered to a request for partitions sent at `sent`
    /// (`None`: it could not be read; what was heard before holds until its leases run out, now
    /// also those of other processes that ran out before);
    /// `may_own`: this process's clock agreed with the store's. Answers the partitions whose
    /// owner changed (another process, this one, or none owns it now), by the view it had.
    pub(crate) fn heard_owners(
        &self,
        kind: &'static str,
        read: Option<Ownership>,
        sent: Instant,
        may_own: bool,
    ) -> Vec<u16> {
        let Some(read) = read else {
            let mut owners = self.owners.write().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, unread)) = owners.iter_mut().find(|(k, _)| *k == kind) {
                unread.asked = Instant::now();
            }
            return Vec::new();
        };
        let mut leases = vec![None; usize::from(PARTITIONS)].into_boxed_slice();
        for lease in &read.leases {
            if lease.left.is_zero() {
                continue;
            }
            if let Some(slot) = leases.get_mut(usize::from(lease.partition)) {
                let key = crate::model::limits::fnv1a64(&[
                    lease.owner.as_bytes(),
                    &[0xff],
                    &lease.epoch.to_le_bytes(),
                ]);
                // From when the request was sent: the store's lease ends no earlier than that.
                let mine = *lease.owner == *self.me && may_own;
                *slot = Some(Heard {
                    key,
                    mine,
                    until: sent + lease.left,
                    since: i64::try_from(lease.epoch)
                        .ok()
                        .and_then(DateTime::<Utc>::from_timestamp_micros),
                    renewed: lease.alive,
                });
            }
        }
        let now = Instant::now();
        let heard = Owners {
            members: Present::new(&self.me, &read.members),
            may_own,
            leases,
            asked: now,
        };
        let mut owners = self.owners.write().unwrap_or_else(PoisonError::into_inner);
        let before = owners
            .iter()
            .position(|(k, _)| *k == kind)
            .map(|i| owners.swap_remove(i).1);
        let changed = (0..PARTITIONS)
            .filter(|p| {
                let was = before
                    .as_ref()
                    .and_then(|b| b.live(*p, now))
                    .map(|h| (h.key, h.mine));
                was != heard.live(*p, now).map(|h| (h.key, h.mine))
            })
            .collect();
        owners.push((kind, heard));
        changed
    }

    /// Forgets the partitions heard at the store of guard `kind` (at a shutdown, or when this
    /// process left its group): its jobs claim as without ownership.
    pub(crate) fn forget_owners(&self, kind: &str) {
        let mut owners = self.owners.write().unwrap_or_else(PoisonError::into_inner);
        owners.retain(|(k, _)| *k != kind);
    }

    /// Who owns the partition of `job` (guarded by kind `kind`) at `now`, as last heard, for the
    /// job's fires from `next` on; and, when another process owns it, when that owner sent its
    /// last renewal, on its own clock (within a second of the store's): it was alive then. One
    /// lookup, made before every fire of the job.
    pub(crate) fn owner_of(
        &self,
        kind: &str,
        job: &str,
        now: Instant,
        next: Option<DateTime<Utc>>,
    ) -> (Owner, Option<DateTime<Utc>>) {
        let owners = self.owners.read().unwrap_or_else(PoisonError::into_inner);
        let Some((_, o)) = owners.iter().find(|(k, _)| *k == kind) else {
            return (Owner::Unknown, None);
        };
        let partition = partition_of(job);
        let renewed = o
            .live(partition, now)
            .filter(|h| !h.mine)
            .and_then(|h| h.renewed);
        (o.owner(partition, now, next), renewed)
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

    fn lease(
        partition: u16,
        owner: &str,
        left_ms: u64,
    ) -> crate::guard::partitions::PartitionLease {
        crate::guard::partitions::PartitionLease {
            partition,
            owner: owner.to_owned(),
            epoch: 1,
            left: std::time::Duration::from_millis(left_ms),
            alive: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn another_owners_lease_holds_past_its_end_until_the_store_is_asked_again() {
        let me = Presence::new("a", true);
        let other = Presence::new("b", true);
        let members = vec![me.me().to_owned(), other.me().to_owned()];
        let p = partition_of("job");
        let read = |owner: &str| {
            Some(Ownership {
                members: members.clone(),
                leases: vec![lease(p, owner, 3_000)],
                server_time: None,
            })
        };
        let next = Some(Utc::now());
        let owner = || me.owner_of("redis", "job", Instant::now(), next).0;
        me.heard_owners("redis", read(other.me()), Instant::now(), true);
        assert_eq!(owner(), Owner::Elsewhere);
        // Frozen past the lease: the store was not asked since, so the owner may have renewed.
        tokio::time::advance(std::time::Duration::from_secs(10)).await;
        assert_eq!(owner(), Owner::Elsewhere);
        // Asked, and no answer: the lease has run out.
        me.heard_owners("redis", None, Instant::now(), true);
        assert_eq!(owner(), Owner::Unknown);
        // This process's own lease is never taken to hold past its end.
        me.heard_owners("redis", read(me.me()), Instant::now(), true);
        assert_eq!(owner(), Owner::Here);
        tokio::time::advance(std::time::Duration::from_secs(10)).await;
        assert_eq!(owner(), Owner::Unknown);
    }

    #[test]
    fn a_departed_owners_partitions_are_asked_for_as_its_leases_run_out() {
        let me = Presence::new("a", true);
        let other = Presence::new("b", true);
        let members = vec![me.me().to_owned(), other.me().to_owned()];
        // The partitions this process is named first for among the two members.
        let mine: Vec<u16> = (0..PARTITIONS)
            .filter(|p| Present::new(me.me(), &members).first_here(&partition_key(*p)))
            .collect();
        let (p, q) = (mine[0], mine[1]);
        let theirs = (0..PARTITIONS)
            .find(|p| !mine.contains(p))
            .expect("one is theirs");
        let answered = Instant::now();
        let read = |leases| Ownership {
            members: members.clone(),
            leases,
            server_time: None,
        };
        // Held by a process that left the group: asked for just after each lease runs out.
        let gone = "c 3 0003";
        let at = me.take_over_at(
            &read(vec![lease(p, gone, 1_500), lease(q, gone, 900)]),
            true,
            answered,
        );
        assert_eq!(
            at,
            Some(answered + std::time::Duration::from_millis(900) + TAKE_OVER_MARGIN)
        );
        // Not when the owner is still a member, the lease ran out (the next read takes it), the
        // partition is another member's to take, it is this process's own, or it may not own.
        for (leases, may_own) in [
            (vec![lease(p, other.me(), 1_500)], true),
            (vec![lease(p, gone, 0)], true),
            (vec![lease(theirs, gone, 1_500)], true),
            (vec![lease(p, me.me(), 1_500)], true),
            (vec![lease(p, gone, 1_500)], false),
        ] {
            assert_eq!(me.take_over_at(&read(leases), may_own, answered), None);
        }
    }
}
