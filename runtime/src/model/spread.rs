//! Which process claims a shared job's fires first (docs/design/standby.md):
//! rendezvous hashing over the processes present at the job's store, so that the jobs spread
//! evenly over them and a process that comes or goes moves only its own share of them.
//!
//! Every process computes the same answer from the same list, whatever order it heard it in. A
//! process that heard another list (one came or went a moment ago) may answer otherwise for a
//! while: then two processes claim a fire at its instant, or none does and the fire waits for
//! the standby. The guard still decides who runs it; only the timing of the claims moves.

use super::limits::fnv1a64;

/// The processes present at one shared store as this process last heard them, itself included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Present {
    me: u64,
    others: Box<[u64]>,
}

impl Present {
    /// `all` as listed by the store, `me` this process's own id (counted once, listed or not).
    pub(crate) fn new(me: &str, all: &[String]) -> Self {
        let me_key = key(me);
        let mut others: Vec<u64> = all
            .iter()
            .map(|id| key(id))
            .filter(|k| *k != me_key)
            .collect();
        others.sort_unstable();
        others.dedup();
        Present {
            me: me_key,
            others: others.into(),
        }
    }

    /// How many processes are present.
    pub(crate) fn count(&self) -> usize {
        self.others.len() + 1
    }

    /// Whether this process is the one that claims `job`'s fires first: the one whose score
    /// for the job is highest (ties, which need equal 64-bit hashes, go to the higher key).
    pub(crate) fn first_here(&self, job: &str) -> bool {
        let job = fnv1a64(&[job.as_bytes()]);
        let mine = (score(job, self.me), self.me);
        self.others
            .iter()
            .all(|&other| (score(job, other), other) < mine)
    }
}

/// A process id as a 64-bit key (FNV-1a: the same in every build of every process).
fn key(id: &str) -> u64 {
    fnv1a64(&[id.as_bytes()])
}

/// The rendezvous score of a job for a process: SplitMix64's finaliser over both hashes, which
/// spreads a one-bit difference in either over the whole word.
fn score(job: u64, process: u64) -> u64 {
    let mut z = job ^ process.rotate_left(32);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Who owns a shared job's partition, as this process last heard it from the store
/// (docs/design/ownership.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// This process holds the partition's lease: it claims the job's fires at their instant.
    Here,
    /// Another process of this one's group holds a live lease, and held it already when the
    /// job's next fire came due: it claims the job's fires, and this process leaves them to it.
    Elsewhere,
    /// Nobody holds a live lease, or it is not known (the store keeps no partitions, could not
    /// be read, or ownership is off): the job's fires are claimed as without ownership.
    Unknown,
}

/// When a shared job's process claims its fires, as its claims' answers and the processes
/// present say, in one byte (every job carries it): whether another process got the last fire,
/// whether this one is named first (or that is not known), whether it got a fire after standing
/// by although another is named first, and whether the claim in flight was sent after a standby.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Turn(u8);

impl Turn {
    const LOST_LAST: u8 = 1;
    const NAMED_KNOWN: u8 = 2;
    const NAMED_HERE: u8 = 4;
    const FREE_HERE: u8 = 8;
    const CLAIM_WAITED: u8 = 16;
    const OWNED_HERE: u8 = 32;
    const OWNED_ELSEWHERE: u8 = 64;
    const LEFT: u8 = 128;

    fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    fn set(&mut self, bit: u8, on: bool) {
        if on {
            self.0 |= bit;
        } else {
            self.0 &= !bit;
        }
    }

    /// Whether this process waits the standby before it claims a fire:
    /// - named first: never;
    /// - named for another: always, unless it got a fire after standing by for it, which shows
    ///   that the one named does not claim the job (it does not run it), until it loses one;
    /// - not known: when another process got the last fire.
    pub(crate) fn stands_by(self) -> bool {
        if self.has(Self::OWNED_HERE) {
            return false;
        }
        match self.first_here() {
            Some(true) => false,
            Some(false) => !self.has(Self::FREE_HERE),
            None => self.has(Self::LOST_LAST),
        }
    }

    /// Whether this process is named first for the job, if known.
    pub(crate) fn first_here(self) -> Option<bool> {
        self.has(Self::NAMED_KNOWN)
            .then_some(self.has(Self::NAMED_HERE))
    }

    /// Who is named first now. When that changes (a process came or went), what this process
    /// learned of the one named before no longer holds.
    pub(crate) fn set_first_here(&mut self, first: Option<bool>) {
        if first != self.first_here() {
            self.set(Self::FREE_HERE, false);
        }
        self.set(Self::NAMED_KNOWN, first.is_some());
        self.set(Self::NAMED_HERE, first == Some(true));
    }

    /// Who owns the job's partition now (docs/design/ownership.md).
    pub(crate) fn set_owner(&mut self, owner: Owner) {
        self.set(Self::OWNED_HERE, owner == Owner::Here);
        self.set(Self::OWNED_ELSEWHERE, owner == Owner::Elsewhere);
    }

    /// Whether another live process owns the job's partition: this one leaves its fires to it.
    pub(crate) fn watching(self) -> bool {
        self.has(Self::OWNED_ELSEWHERE)
    }

    /// A fire was left to the partition's owner (`true`), or the fires left were walked
    /// (`false`).
    pub(crate) fn set_left(&mut self, left: bool) {
        self.set(Self::LEFT, left);
    }

    /// Whether fires were left to an owner since the last walk.
    pub(crate) fn left(self) -> bool {
        self.has(Self::LEFT)
    }

    /// A claim of a scheduled fire went out, after a standby wait or not.
    pub(crate) fn claim_sent(&mut self, waited: bool) {
        self.set(Self::CLAIM_WAITED, waited);
    }

    /// This process got the scheduled fire it claimed.
    pub(crate) fn won(&mut self) {
        if self.first_here() == Some(false) && self.has(Self::CLAIM_WAITED) {
            self.set(Self::FREE_HERE, true);
        }
        self.set(Self::LOST_LAST, false);
    }

    /// Another process got the scheduled fire this one claimed.
    pub(crate) fn lost(&mut self) {
        self.set(Self::LOST_LAST, true);
        self.set(Self::FREE_HERE, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("replica-{i} 4242 {i:08x}"))
            .collect()
    }

    fn firsts(me: &str, all: &[String], jobs: &[String]) -> Vec<bool> {
        let present = Present::new(me, all);
        jobs.iter().map(|j| present.first_here(j)).collect()
    }

    #[test]
    fn every_job_has_exactly_one_first_process_and_they_share_the_jobs_evenly() {
        let jobs: Vec<String> = (0..30_000).map(|i| format!("tenant-{i}-report")).collect();
        for n in 1..=5 {
            let all = ids(n);
            let per: Vec<Vec<bool>> = all.iter().map(|me| firsts(me, &all, &jobs)).collect();
            for j in 0..jobs.len() {
                assert_eq!(per.iter().filter(|p| p[j]).count(), 1, "job {j} with {n}");
            }
            let fair = jobs.len() / n;
            for (i, p) in per.iter().enumerate() {
                let mine = p.iter().filter(|x| **x).count();
                assert!(
                    mine.abs_diff(fair) * 20 <= fair,
                    "process {i} of {n} is first for {mine} of {} jobs",
                    jobs.len()
                );
            }
        }
    }

    #[test]
    fn a_process_that_leaves_moves_only_its_own_jobs() {
        let jobs: Vec<String> = (0..5_000).map(|i| format!("job-{i}")).collect();
        let all = ids(4);
        let fewer = all[..3].to_vec();
        for me in &fewer {
            let before = firsts(me, &all, &jobs);
            let after = firsts(me, &fewer, &jobs);
            for j in 0..jobs.len() {
                // A job this process had stays; it only gains jobs of the one that left.
                assert!(!before[j] || after[j], "job {j} moved away from {me}");
            }
        }
    }

    #[test]
    fn the_order_of_the_list_and_repeats_do_not_matter() {
        let all = ids(3);
        let mut shuffled = vec![
            all[2].clone(),
            all[0].clone(),
            all[1].clone(),
            all[0].clone(),
        ];
        assert_eq!(
            Present::new(&all[1], &all),
            Present::new(&all[1], &shuffled)
        );
        shuffled.retain(|id| id != &all[1]);
        // Not listed yet (its own attendance not read back): still counted.
        assert_eq!(
            Present::new(&all[1], &all),
            Present::new(&all[1], &shuffled)
        );
        assert_eq!(Present::new(&all[1], &all).count(), 3);
        assert!(Present::new("alone", &[]).first_here("any"));
    }
}
