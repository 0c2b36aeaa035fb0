//! The control feed of a shared store: a log of pause, resume and run-now requests that every
//! replica reads about once a second, so that a request made anywhere — another replica, the
//! command-line tool — reaches every replica that runs the job; and the roster of the jobs the
//! replicas run, which the tool lists (docs/guide/controls.md); and the
//! processes present, over which the jobs spread (docs/design/standby.md).
//!
//! A pause itself is stored with the job's state by [`GuardControls::set_pause`](super::GuardControls::set_pause)
//! and honoured by every claim, whether or not a replica read the feed: the feed only tells
//! replicas early (their status, their health) and carries run-now requests.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::partitions::Ownership;
use super::GuardError;
use crate::control::ManualRun;
use crate::registry::BoxFuture;

/// How often a replica reads its stores' feeds.
pub(crate) const FEED_POLL: Duration = Duration::from_secs(1);

/// How long a process stays present at a store after it last attended (docs/design/standby.md): a
/// few reads of the feed, so that one slow read does not drop it.
pub(crate) const PRESENCE_TTL: Duration = Duration::from_secs(5);

/// Requests read per call at most; a replica reads again at once when it got this many.
pub(crate) const FEED_BATCH: usize = 1000;

/// What an operator asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ControlAction {
    /// The job was paused by `by`.
    Pause { by: String },
    /// The job was resumed by `by`.
    Resume { by: String },
    /// Run the job now, as this manual run.
    Trigger(ManualRun),
}

impl ControlAction {
    /// `pause`, `resume` or `trigger`: the word the stores keep.
    pub(crate) fn word(&self) -> &'static str {
        match self {
            ControlAction::Pause { .. } => "pause",
            ControlAction::Resume { .. } => "resume",
            ControlAction::Trigger(_) => "trigger",
        }
    }

    /// The action's argument as the stores keep it: who, or the manual run's id in hex.
    pub(crate) fn argument(&self) -> String {
        match self {
            ControlAction::Pause { by } | ControlAction::Resume { by } => by.clone(),
            ControlAction::Trigger(run) => format!("{:016x}", run.id),
        }
    }

    /// Reads what [`word`](Self::word) and [`argument`](Self::argument) wrote; `at` is the
    /// request's time (a trigger's `requested_at`).
    pub(crate) fn parse(word: &str, argument: &str, at: DateTime<Utc>) -> Option<Self> {
        match word {
            "pause" => Some(ControlAction::Pause {
                by: argument.to_owned(),
            }),
            "resume" => Some(ControlAction::Resume {
                by: argument.to_owned(),
            }),
            "trigger" => u64::from_str_radix(argument, 16).ok().map(|id| {
                ControlAction::Trigger(ManualRun {
                    id,
                    requested_at: at,
                })
            }),
            _ => None,
        }
    }
}

/// One request of the feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ControlRequest {
    /// The job's name.
    pub(crate) job: String,
    pub(crate) action: ControlAction,
    /// When it was asked for.
    pub(crate) at: DateTime<Utc>,
}

/// A job as a replica announces it in the roster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RosterEntry {
    /// The job's name.
    pub(crate) job: String,
    /// Its schedule as the attribute writes it (`cron = "..."` with its `tz`, or `every`), so
    /// that the command-line tool can tell the next fire.
    pub(crate) schedule: String,
    /// The replica that announced it last (`CRONGUARD_INSTANCE`).
    pub(crate) instance: String,
    /// When it was announced.
    pub(crate) at: DateTime<Utc>,
    /// How long after its fire time a fire must have started: the misfire grace plus the whole
    /// jitter (the job model's `due_grace`), so that the command-line tool's health check tells
    /// which fire should have started by now. `None` in an entry an earlier version announced:
    /// the reader takes [`DEFAULT_MISFIRE_GRACE`](crate::DEFAULT_MISFIRE_GRACE) then.
    pub(crate) due_grace: Option<Duration>,
}

/// A process that attended a store (a replica reading its control feed), as the store last saw
/// it: read without attending, for the command-line tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SeenProcess {
    /// Its id: the instance name, the operating-system process id and a random part (see
    /// `executor::Presence`).
    pub(crate) id: String,
    /// How long ago it last attended, by the store's clock (the lock dir: this host's).
    pub(crate) ago: Duration,
}

/// What one read of a feed found.
#[derive(Debug)]
pub(crate) struct FeedRead {
    /// The requests after the cursor, oldest first, at most [`FEED_BATCH`].
    pub(crate) requests: Vec<ControlRequest>,
    /// The cursor to read on from.
    pub(crate) cursor: String,
    /// The feed no longer holds what the cursor was taken on: it was emptied, dropped and made
    /// again, or restored from a copy, so that what was added since may lie below the cursor.
    /// `requests` are then read from the start of what it holds, which may include requests
    /// read before (docs/guide/controls.md).
    pub(crate) restarted: bool,
}

impl FeedRead {
    /// Read on from `cursor`, the feed being what it was.
    pub(crate) fn on(requests: Vec<ControlRequest>, cursor: String) -> Self {
        FeedRead {
            requests,
            cursor,
            restarted: false,
        }
    }
}

#[cfg(test)]
impl FeedRead {
    /// The requests and the cursor, for tests that do not look at [`restarted`](Self::restarted).
    pub(crate) fn parts(self) -> (Vec<ControlRequest>, String) {
        (self.requests, self.cursor)
    }
}

/// A store's control feed and roster.
pub(crate) trait ControlFeed: Send + Sync + 'static {
    /// Appends `request` to the feed.
    fn publish(&self, request: ControlRequest) -> BoxFuture<Result<(), GuardError>>;

    /// The requests after `cursor`, oldest first, at most [`FEED_BATCH`], and the cursor to
    /// read on from. With `cursor` `None`: no requests, and the cursor of the feed's end (a
    /// replica that starts does not replay old requests). A feed that no longer holds what
    /// `cursor` was taken on is read from its start ([`FeedRead::restarted`]): a cursor is never
    /// trusted past a store that was emptied, recreated or restored, since the requests made
    /// since may have ids, or offsets, below it.
    fn read(&self, cursor: Option<String>) -> BoxFuture<Result<FeedRead, GuardError>>;

    /// Records (or refreshes) these jobs in the roster.
    fn announce(&self, jobs: Vec<RosterEntry>) -> BoxFuture<Result<(), GuardError>>;

    /// Every job in the roster, sorted by name.
    fn roster(&self) -> BoxFuture<Result<Vec<RosterEntry>, GuardError>>;

    /// Lists `process` as present for [`PRESENCE_TTL`], forgets the processes that did not
    /// attend within it, and returns the ids of the processes present, in any order.
    fn attend(&self, process: &str) -> BoxFuture<Result<Vec<String>, GuardError>>;

    /// Every process the store still lists, without attending: those present, and those that
    /// stopped attending less than [`PRESENCE_TTL`] before the last attend of another (the store
    /// forgets a process only when another attends, so the last process of a store that every
    /// process left stays listed, with how long ago it was seen).
    fn processes(&self) -> BoxFuture<Result<Vec<SeenProcess>, GuardError>>;

    /// Partition ownership (docs/design/ownership.md), in one step: lists `process` as a member
    /// of `group` for [`MEMBER_TTL`](super::partitions::MEMBER_TTL); takes or renews for `lease` each partition of `wanted`
    /// that is free, expired or its own (a partition taken from another owner, or its own after
    /// it expired, gets a higher epoch); gives up at once every partition of the group it owns
    /// and no longer wants; and answers the group's members and every lease it holds.
    /// `None` (the default): the store keeps no partitions, and every process claims every fire.
    fn own(
        &self,
        group: &str,
        process: &str,
        wanted: &[u16],
        lease: Duration,
    ) -> BoxFuture<Result<Option<Ownership>, GuardError>> {
        let _ = (group, process, wanted, lease);
        Box::pin(async { Ok(None) })
    }

    /// A planned stop: removes `process` from the members of `group` at once and gives up every
    /// partition of the group it owns, so that the processes that go on take them at their next
    /// read rather than once it ages out of the members. The default gives the partitions up
    /// through [`own`](Self::own), and the membership runs out after
    /// [`MEMBER_TTL`](super::partitions::MEMBER_TTL).
    fn leave(
        &self,
        group: &str,
        process: &str,
        lease: Duration,
    ) -> BoxFuture<Result<(), GuardError>> {
        let owned = self.own(group, process, &[], lease);
        Box::pin(async move { owned.await.map(|_| ()) })
    }
}

/// Two processes attend `feed` and both are listed, each once (for each store's own tests, which
/// then age `"b 2 0002"` past [`PRESENCE_TTL`] and check that [`expect_alone`] holds).
#[cfg(test)]
pub(crate) async fn two_attend(feed: &dyn ControlFeed) {
    let listed = |mut ids: Vec<String>| {
        ids.sort();
        ids
    };
    let first = feed.attend("a 1 0001").await.expect("attends");
    assert_eq!(listed(first), ["a 1 0001"]);
    let second = feed.attend("b 2 0002").await.expect("attends");
    assert_eq!(listed(second), ["a 1 0001", "b 2 0002"]);
    let again = feed.attend("a 1 0001").await.expect("attends again");
    assert_eq!(listed(again), ["a 1 0001", "b 2 0002"]);
}

/// After [`two_attend`] and `"b 2 0002"` aged past [`PRESENCE_TTL`]: only `"a 1 0001"` is present.
#[cfg(test)]
pub(crate) async fn expect_alone(feed: &dyn ControlFeed) {
    let alone = feed.attend("a 1 0001").await.expect("attends");
    assert_eq!(
        alone,
        ["a 1 0001"],
        "a process that stopped attending is forgotten"
    );
}

/// After [`two_attend`] and `"b 2 0002"` aged past [`PRESENCE_TTL`]: both are listed without
/// attending, `"a 1 0001"` as seen just now and `"b 2 0002"` as seen longer ago than that, and
/// listing again forgets neither.
#[cfg(test)]
pub(crate) async fn listed_without_attending(feed: &dyn ControlFeed) {
    for _ in 0..2 {
        let mut seen = feed.processes().await.expect("lists");
        seen.sort_by(|x, y| x.id.cmp(&y.id));
        let ids: Vec<&str> = seen.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["a 1 0001", "b 2 0002"], "{seen:?}");
        assert!(seen[0].ago < Duration::from_secs(2), "{seen:?}");
        assert!(seen[1].ago >= PRESENCE_TTL, "{seen:?}");
    }
}

/// The partition leases of a store ([`ControlFeed::own`]), checked the same way for each store
/// that keeps them: who takes which partition, epochs that rise on every change of owner, a
/// partition given up at once, and one whose lease ran out taken by another.
#[cfg(all(test, any(feature = "redis", feature = "postgres")))]
pub(crate) async fn partition_leases(feed: &dyn ControlFeed) {
    use super::partitions::PartitionLease;
    let lease = Duration::from_secs(30);
    let own = |process: &'static str, wanted: &'static [u16], lease: Duration| async move {
        let mut read = feed
            .own("g1", process, wanted, lease)
            .await
            .expect("answers")
            .expect("keeps partitions");
        read.members.sort();
        read.leases.sort_by_key(|l| l.partition);
        read
    };
    let of = |leases: &[PartitionLease], p: u16| {
        leases
            .iter()
            .find(|l| l.partition == p)
            .cloned()
            .unwrap_or_else(|| panic!("partition {p} in {leases:?}"))
    };
    let live = |l: &PartitionLease, owner: &str| {
        l.owner == owner && l.left > Duration::from_secs(20) && l.left <= Duration::from_secs(30)
    };

    let a = own("a 1 0001", &[1, 2], lease).await;
    assert_eq!(a.members, ["a 1 0001"]);
    let server = a.server_time.expect("the store's clock");
    assert!(
        (server - chrono::Utc::now()).num_seconds().abs() < 5,
        "{server}"
    );
    assert_eq!(a.leases.len(), 2, "{a:?}");
    let (a1, a2) = (of(&a.leases, 1), of(&a.leases, 2));
    assert!(live(&a1, "a 1 0001") && live(&a2, "a 1 0001"), "{a:?}");
    assert!(a1.epoch > 0 && a2.epoch > 0);

    // Another process cannot take a live lease; it takes a free partition.
    let b = own("b 2 0002", &[2, 3], lease).await;
    assert_eq!(b.members, ["a 1 0001", "b 2 0002"]);
    let still = of(&b.leases, 2);
    assert!(
        live(&still, "a 1 0001") && still.epoch == a2.epoch,
        "still a's, unchanged: {still:?}"
    );
    assert!(live(&of(&b.leases, 3), "b 2 0002"));

    // Renewing keeps the epoch; a partition no longer wanted is given up at once.
    let a = own("a 1 0001", &[1], lease).await;
    assert_eq!(of(&a.leases, 1).epoch, a1.epoch, "renewed, same owner");
    assert!(live(&of(&a.leases, 1), "a 1 0001"));
    assert_eq!(of(&a.leases, 2).left, Duration::ZERO, "given up");

    // The next owner of a partition gets a higher epoch.
    let b = own("b 2 0002", &[2, 3], lease).await;
    let b2 = of(&b.leases, 2);
    assert!(
        live(&b2, "b 2 0002") && b2.epoch > a2.epoch,
        "{b2:?} after {a2:?}"
    );

    // A lease that ran out (here: one of no length) is free for anyone, with a higher epoch,
    // also for its own owner.
    let a = own("a 1 0001", &[1, 5], Duration::ZERO).await;
    let a5 = of(&a.leases, 5);
    assert_eq!((a5.owner.as_str(), a5.left), ("a 1 0001", Duration::ZERO));
    let a = own("a 1 0001", &[1, 5], lease).await;
    let again = of(&a.leases, 5);
    assert!(
        live(&again, "a 1 0001") && again.epoch > a5.epoch,
        "{again:?}"
    );
    let _ = own("a 1 0001", &[1, 5], Duration::ZERO).await;
    let b = own("b 2 0002", &[2, 3, 5], lease).await;
    let b5 = of(&b.leases, 5);
    assert!(live(&b5, "b 2 0002") && b5.epoch > again.epoch, "{b5:?}");

    // A process that leaves is no member at once, and its partitions are free for the others.
    feed.leave("g1", "b 2 0002", lease).await.expect("leaves");
    let a = own("a 1 0001", &[1, 2, 3, 5], lease).await;
    assert_eq!(a.members, ["a 1 0001"], "{a:?}");
    for p in [1, 2, 3, 5] {
        assert!(live(&of(&a.leases, p), "a 1 0001"), "{p}: {a:?}");
    }
    assert!(of(&a.leases, 3).epoch > of(&b.leases, 3).epoch);
    // Leaving again, or leaving a group one never joined, changes nothing.
    feed.leave("g1", "b 2 0002", lease)
        .await
        .expect("leaves again");
    feed.leave("g3", "b 2 0002", lease)
        .await
        .expect("leaves a group it is not in");
    let a = own("a 1 0001", &[1, 2, 3, 5], lease).await;
    assert_eq!(a.members, ["a 1 0001"]);
    assert!(live(&of(&a.leases, 3), "a 1 0001"));

    // Groups are apart.
    let other = feed
        .own("g2", "c 3 0003", &[1], lease)
        .await
        .expect("answers")
        .expect("keeps partitions");
    assert_eq!(other.members, ["c 3 0003"]);
    assert_eq!(other.leases.len(), 1);
    assert!(live(&other.leases[0], "c 3 0003"));
}
