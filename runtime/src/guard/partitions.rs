//! Partition ownership (docs/design/ownership.md): the shared jobs hash into [`PARTITIONS`]
//! partitions, and each partition has a lease in the store — its owner, an epoch that rises on
//! every change of owner, and an expiry on the store's clock. Only the owner claims the fires of a
//! partition's jobs; the other processes of its group leave them to it, and a process that gains
//! a partition walks the fires its jobs left to the owner before (docs/guide/downtime.md).
//!
//! The processes that share partitions form a **group**: those that run the same shared jobs of
//! one store ([`group_of`]). A process that runs other jobs (another binary, another version,
//! another `CRONGUARD_JOBS`) is in another group, and the two groups' owners both claim the jobs
//! they have in common, per fire, as every process did before: the per-fire record in the store
//! decides who runs each fire, whoever claims it.

use std::time::Duration;

use crate::model::limits::fnv1a64;

/// How many partitions the jobs of a group hash into: enough for the jobs to spread evenly over
/// tens of processes, few enough that one request renews them all.
pub(crate) const PARTITIONS: u16 = 256;

/// How long an owner holds a partition after its last renewal (every read of the control feed,
/// about once a second): a process that stops renewing loses its partitions after this
/// ([`Builder::partition_ownership`](crate::Builder::partition_ownership)).
pub const PARTITION_LEASE: Duration = Duration::from_secs(3);

/// How long a process stays a member of its group after it last asked for partitions (about once
/// a second): less than [`PARTITION_LEASE`], so that when an owner stops, the others name the new
/// owners of its partitions before its leases run out, and take them as the leases run out
/// rather than once it drops out of [`PRESENCE_TTL`](super::feed::PRESENCE_TTL)
/// (docs/design/ownership.md). A member that is only slow costs asks the store refuses while its
/// leases live, never an owner changed under it.
#[cfg_attr(not(any(feature = "redis", feature = "postgres")), allow(dead_code))]
pub(crate) const MEMBER_TTL: Duration = Duration::from_secs(2);

/// The partition of a job: FNV-1a over its name, the same in every build of every process.
pub(crate) fn partition_of(job: &str) -> u16 {
    let hash = fnv1a64(&[b"partition\xff", job.as_bytes()]);
    u16::try_from(hash % u64::from(PARTITIONS)).unwrap_or(0)
}

/// The group of a process at one store: a digest of the names of the shared jobs it runs there,
/// in hex (the order they are given in does not matter).
pub(crate) fn group_of<'a>(jobs: impl IntoIterator<Item = &'a str>) -> String {
    let mut hashes: Vec<u64> = jobs
        .into_iter()
        .map(|job| fnv1a64(&[job.as_bytes()]))
        .collect();
    hashes.sort_unstable();
    hashes.dedup();
    let mut bytes = Vec::with_capacity(hashes.len() * 8 + 8);
    bytes.extend_from_slice(&u64::from(PARTITIONS).to_le_bytes());
    for h in hashes {
        bytes.extend_from_slice(&h.to_le_bytes());
    }
    format!("{:016x}", fnv1a64(&[&bytes]))
}

/// One partition's lease as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionLease {
    pub(crate) partition: u16,
    /// The owner's process id (see `executor::Presence`).
    pub(crate) owner: String,
    /// Rises on every change of owner, also after the store lost its data (it is taken from the
    /// store's clock in µs when that is higher).
    pub(crate) epoch: u64,
    /// How much of the lease was left when the store answered; zero once it expired.
    pub(crate) left: Duration,
    /// The owner's own clock when it sent its last renewal: it was alive then. (The store's
    /// clock when it applied the renewal would not tell: a renewal can reach the store long after
    /// its owner froze.)
    pub(crate) alive: Option<chrono::DateTime<chrono::Utc>>,
}

/// What the store answered to [`ControlFeed::own`](super::feed::ControlFeed::own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ownership {
    /// The processes of the group present at the store (this one included).
    pub(crate) members: Vec<String>,
    /// The partitions the store holds a lease of, live or expired, in any order.
    pub(crate) leases: Vec<PartitionLease>,
    /// The store's clock when it answered, if it has one: a process whose clock is off it does
    /// not own partitions.
    pub(crate) server_time: Option<chrono::DateTime<chrono::Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_spread_over_every_partition() {
        let mut counts = vec![0u32; usize::from(PARTITIONS)];
        for i in 0..25_600 {
            counts[usize::from(partition_of(&format!("job-{i}")))] += 1;
        }
        assert!(counts.iter().all(|c| (50..=150).contains(c)), "{counts:?}");
    }

    #[test]
    fn a_group_is_its_set_of_jobs() {
        assert_eq!(group_of(["a", "b"]), group_of(["b", "a", "a"]));
        assert_ne!(group_of(["a", "b"]), group_of(["a"]));
        assert_ne!(group_of(["a"]), group_of([]));
        assert_eq!(group_of(["a"]).len(), 16);
    }
}
