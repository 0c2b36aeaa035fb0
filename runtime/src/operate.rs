//! The operator's controls on a running scheduler — pause, resume, run now, add, remove — and
//! the task that reads the control feeds of the shared stores, so that a control made on another
//! replica or with the command-line tool reaches the jobs of this one (docs/guide/controls.md).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::control::{ManualRun, Pause};
use crate::executor::{
    lock, GuardView, Inbox, JobControl, JobSlot, Presence, Pulses, ShardJobs,
    OWNER_CLOCK_TOLERANCE, STALL_LIMIT,
};
use crate::guard::feed::{
    ControlAction, ControlFeed, ControlRequest, RosterEntry, FEED_BATCH, FEED_POLL,
};
use crate::guard::partitions::{self, PARTITION_LEASE};
use crate::guard::{Guard, GuardError, GuardErrorKind};
use crate::job::{Job, JobDefaults};
use crate::model::SettingsPool;
use crate::options::Lock;

/// How long a control waits for the guard's store.
const STORE_WAIT: Duration = Duration::from_secs(5);

/// Builds the guard of a job added while the scheduler runs, from the stores connected at start.
pub(crate) trait GuardMaker: Send + Sync {
    /// The job's guard (`None`: the in-process guard), or what is wrong.
    fn guard(&self, job: &Job) -> Result<Option<Arc<dyn Guard>>, String>;
    /// Everything that keeps `job` from starting (its settings, missing state, the lock dir).
    fn problems(&self, job: &Job) -> Vec<String>;
}

/// The control feeds of the stores the jobs use, by the guard kind they serve.
pub(crate) type Feeds = BTreeMap<&'static str, Arc<dyn ControlFeed>>;

/// What the controls reach: every shard's jobs and inbox, the feeds, and the guard maker.
pub(crate) struct ControlPlane {
    pub(crate) shards: Arc<[ShardJobs]>,
    pub(crate) inboxes: Arc<[Inbox]>,
    /// Whether each shard still runs: a process with a stalled shard owns no partition.
    pub(crate) pulses: Arc<Pulses>,
    pub(crate) clock: Clock,
    pub(crate) instance: Arc<str>,
    pub(crate) feeds: Feeds,
    /// Who is present at each store, as the feeds' readers hear it.
    pub(crate) presence: Arc<Presence>,
    pub(crate) maker: Box<dyn GuardMaker>,
    /// What the builder sets for every job, for jobs added later too.
    pub(crate) defaults: JobDefaults,
    pub(crate) stop: CancellationToken,
    /// The scheduler's runtime: a control may be called from any thread (a blocking job, a thread
    /// of the application's own), and what it hands on runs there.
    pub(crate) runtime: tokio::runtime::Handle,
    /// The scheduler's tasks that shutdown waits for: the feed readers are among them, so that
    /// a process that exits once `shutdown` returns has left its partition groups.
    pub(crate) tasks: tokio_util::task::TaskTracker,
    /// Serialises `add` and `remove`, so that two adds of one name cannot both pass the check;
    /// holds the settings the jobs share, so that jobs added alike share theirs too.
    pub(crate) adding: Mutex<SettingsPool>,
}

/// Where a job lives, and how it is guarded.
struct Found {
    shard: usize,
    idx: u32,
    guard: GuardView,
    lock: Lock,
    /// The job runs here (not only watched).
    enabled: bool,
    /// How late a run asked for may still start.
    misfire_grace: Duration,
}

impl ControlPlane {
    fn find(&self, name: &str) -> Result<Found, ControlError> {
        for (shard, jobs) in self.shards.iter().enumerate() {
            let jobs = lock(jobs);
            if let Some((idx, slot)) = (0u32..)
                .zip(jobs.iter())
                .find(|(_, j)| !j.removed && &**j.name() == name)
            {
                return Ok(Found {
                    shard,
                    idx,
                    guard: slot.guard(),
                    lock: slot.model().spec().lock.clone(),
                    enabled: slot.model().spec().enabled,
                    misfire_grace: slot.model().spec().misfire_grace,
                });
            }
        }
        Err(ControlError::UnknownJob(name.to_owned()))
    }

    /// Hands `control` to the job and waits until it has taken it, so that the status read
    /// next shows it.
    async fn apply(&self, found: &Found, control: JobControl) -> Result<(), ControlError> {
        let inbox = self.inboxes.get(found.shard).ok_or(ControlError::Stopped)?;
        if !self.stop.is_cancelled() && inbox.apply(found.idx, control).await {
            Ok(())
        } else {
            Err(ControlError::Stopped)
        }
    }

    fn send(&self, found: &Found, control: JobControl) -> Result<(), ControlError> {
        let sent = self
            .inboxes
            .get(found.shard)
            .is_some_and(|inbox| inbox.send(found.idx, control));
        if sent && !self.stop.is_cancelled() {
            Ok(())
        } else {
            Err(ControlError::Stopped)
        }
    }

    /// Tells the other replicas through the store's feed; a failure is only logged: the pause
    /// itself is stored, and a run asked for here runs here.
    fn publish(&self, job: &str, lock: &Lock, action: ControlAction) {
        let Some(feed) = self.feeds.get(lock.as_str()).cloned() else {
            return;
        };
        let request = ControlRequest {
            job: job.to_owned(),
            action,
            at: self.clock.now(),
        };
        self.runtime.spawn(async move {
            let job = request.job.clone();
            match tokio::time::timeout(STORE_WAIT, feed.publish(request)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(job = %job, error = %crate::error::Chain(&e), "could not tell the other replicas through the control feed; they learn of a pause at their next fire")
                }
                Err(_) => {
                    tracing::warn!(job = %job, "the control feed did not answer within 5 s; the other replicas learn of a pause at their next fire")
                }
            }
        });
    }

    /// Pauses (`Some`) or resumes (`None`) job `name`.
    pub(crate) async fn set_pause(
        &self,
        name: &str,
        pause: Option<Pause>,
        by: &str,
    ) -> Result<(), ControlError> {
        let found = self.find(name)?;
        if let GuardView::Shared(guard) = &found.guard {
            let stored = tokio::time::timeout(STORE_WAIT, guard.set_pause(pause.clone())).await;
            let failed = |source| ControlError::Guard {
                job: name.to_owned(),
                source,
            };
            match stored {
                Ok(Ok(())) => {}
                Ok(Err(e)) if e.kind() == GuardErrorKind::Unsupported => {
                    return Err(ControlError::Unsupported(name.to_owned()))
                }
                Ok(Err(e)) => return Err(failed(e)),
                Err(_) => {
                    return Err(failed(GuardError::new(
                        GuardErrorKind::Timeout,
                        "the guard's store did not answer within 5 s",
                    )))
                }
            }
            let action = match &pause {
                Some(p) => ControlAction::Pause { by: p.by.clone() },
                None => ControlAction::Resume { by: by.to_owned() },
            };
            self.publish(name, &found.lock, action);
        }
        match &pause {
            Some(p) => tracing::info!(job = %name, by = %p.by, "job paused"),
            None => tracing::info!(job = %name, by = %by, "job resumed"),
        }
        self.apply(&found, JobControl::SetPaused(pause)).await
    }

    /// Runs job `name` now; returns the run's key.
    pub(crate) fn trigger(&self, name: &str) -> Result<String, ControlError> {
        let found = self.find(name)?;
        if let GuardView::Shared(guard) = &found.guard {
            if guard.controls().is_none() {
                return Err(ControlError::Unsupported(name.to_owned()));
            }
        }
        let watched = !found.enabled;
        if watched && !self.feeds.contains_key(found.lock.as_str()) {
            return Err(ControlError::NotRunHere(name.to_owned()));
        }
        let run = ManualRun {
            id: fastrand::u64(1..),
            requested_at: self.clock.now(),
        };
        self.send(&found, JobControl::Trigger(run))?;
        self.publish(name, &found.lock, ControlAction::Trigger(run));
        let key = crate::fire::run_key(name, run.requested_at, Some(run.id));
        if watched {
            tracing::info!(job = %name, run_key = %key, "run asked for; this replica only watches the job, so a replica that runs it takes the run (if none does within the misfire grace, no run happens)");
        } else {
            tracing::info!(job = %name, run_key = %key, "run asked for");
        }
        Ok(key)
    }

    /// Adds `job` and starts following its schedule.
    pub(crate) fn add(&self, mut job: Job) -> Result<(), ControlError> {
        self.defaults.apply(&mut job);
        let mut settings = self.adding.lock().unwrap_or_else(PoisonError::into_inner);
        let name = job.name().to_owned();
        if self.find(&name).is_ok() {
            return Err(ControlError::DuplicateName(name));
        }
        let invalid = |problem: String| ControlError::InvalidJob {
            job: name.clone(),
            problem,
        };
        let problems = self.maker.problems(&job);
        if !problems.is_empty() {
            return Err(invalid(problems.join("; ")));
        }
        let Some(body) = job.body.clone() else {
            return Err(invalid("it has no body".to_owned()));
        };
        let guard = self.maker.guard(&job).map_err(invalid)?;
        let roster = self.feeds.get(job.lock.as_str()).cloned().map(|feed| {
            (
                feed,
                RosterEntry {
                    job: name.clone(),
                    schedule: job.schedule.to_string(),
                    instance: self.instance.to_string(),
                    at: self.clock.now(),
                    due_grace: Some(job.due_grace()),
                },
            )
        });
        // The shard with the fewest jobs takes it.
        let (shard, jobs) = self
            .shards
            .iter()
            .enumerate()
            .min_by_key(|(_, jobs)| lock(jobs).len())
            .ok_or(ControlError::Stopped)?;
        let idx = {
            let mut jobs = lock(jobs);
            let idx = u32::try_from(jobs.len()).map_err(|_| ControlError::Stopped)?;
            jobs.push(JobSlot::new(job, body, guard, &mut settings));
            idx
        };
        let found = Found {
            shard,
            idx,
            guard: GuardView::Local(None),
            lock: Lock::Local,
            enabled: true,
            // Only hands the new job its schedule: no run asked for goes through it.
            misfire_grace: Duration::ZERO,
        };
        self.send(&found, JobControl::Schedule)?;
        if let Some((feed, entry)) = roster {
            self.runtime.spawn(async move {
                let _ = tokio::time::timeout(STORE_WAIT, feed.announce(vec![entry])).await;
            });
        }
        tracing::info!(job = %name, "job added");
        Ok(())
    }

    /// Removes job `name`: it fires no more; a run going on finishes.
    pub(crate) fn remove(&self, name: &str) -> Result<(), ControlError> {
        let _one_at_a_time = self.adding.lock().unwrap_or_else(PoisonError::into_inner);
        let found = self.find(name)?;
        // Marked at once, so that the name is free for `add` before the shard has handled it.
        if let Some(jobs) = self.shards.get(found.shard) {
            if let Some(slot) = lock(jobs).get_mut(found.idx as usize) {
                slot.removed = true;
            }
        }
        self.send(&found, JobControl::Remove)?;
        tracing::info!(job = %name, "job removed");
        Ok(())
    }

    /// The jobs of guard kind `kind`, as the roster lists them.
    fn roster(&self, kind: &str) -> Vec<RosterEntry> {
        let at = self.clock.now();
        let mut entries = Vec::new();
        for jobs in self.shards.iter() {
            for slot in lock(jobs).iter().filter(|s| !s.removed) {
                let spec = slot.model().spec();
                if spec.lock.as_str() == kind {
                    entries.push(RosterEntry {
                        job: spec.name.to_string(),
                        schedule: spec.schedule.to_string(),
                        instance: self.instance.to_string(),
                        at,
                        due_grace: Some(slot.model().due_grace()),
                    });
                }
            }
        }
        entries
    }

    /// The jobs of guard kind `kind` that run here (not removed, enabled), each as its name and
    /// schedule.
    fn running_jobs(&self, kind: &str) -> Vec<String> {
        let mut names = Vec::new();
        for jobs in self.shards.iter() {
            for slot in lock(jobs).iter().filter(|s| !s.removed) {
                let spec = slot.model().spec();
                if spec.enabled && spec.lock.as_str() == kind {
                    // The schedule too: a version that fires the job at other instants is another
                    // group, whose owners claim the fires of its own schedule.
                    names.push(format!("{}\u{ff}{}", spec.name, spec.schedule));
                }
            }
        }
        names
    }

    /// Tells the jobs of guard kind `kind` in the `changed` partitions (all: `None`) that their
    /// partition's owner changed.
    fn tell_owner_changed(&self, kind: &str, changed: Option<&[u16]>) {
        for (shard, jobs) in self.shards.iter().enumerate() {
            let found: Vec<u32> = (0u32..)
                .zip(lock(jobs).iter())
                .filter(|(_, slot)| {
                    !slot.removed
                        && slot.model().spec().lock.as_str() == kind
                        && changed
                            .is_none_or(|c| c.contains(&partitions::partition_of(slot.name())))
                })
                .map(|(idx, _)| idx)
                .collect();
            if let Some(inbox) = self.inboxes.get(shard) {
                for idx in found {
                    inbox.send(idx, JobControl::OwnerChanged);
                }
            }
        }
    }

    /// Hands a request read from the feed of guard kind `kind` to its job, if it runs here.
    /// A request read again from the start of a feed that was recreated or restored (`replayed`)
    /// is not handed on when it is a run whose misfire grace has passed: it was due when it was
    /// made, and was read then (the job would only report it as a misfire now, although it ran).
    fn deliver(&self, kind: &str, request: ControlRequest, replayed: bool) {
        let Ok(found) = self.find(&request.job) else {
            return;
        };
        if found.lock.as_str() != kind {
            return;
        }
        if let (true, ControlAction::Trigger(run)) = (replayed, &request.action) {
            let since = (self.clock.now() - run.requested_at)
                .to_std()
                .unwrap_or_default();
            if since > found.misfire_grace {
                tracing::debug!(job = %request.job, run = %format!("{:016x}", run.id), "a run asked for, read again from the start of the control feed, is past its misfire grace; not taken again");
                return;
            }
        }
        let control = match request.action {
            ControlAction::Pause { by } => JobControl::SetPaused(Some(Pause::new(by, request.at))),
            ControlAction::Resume { .. } => JobControl::SetPaused(None),
            ControlAction::Trigger(run) => JobControl::Trigger(run),
        };
        let _ = self.send(&found, control);
    }
}

/// Starts one task per feed: it takes the feed's end, announces this replica's jobs in the
/// roster, then reads the feed every [`FEED_POLL`] until the scheduler stops, and leaves its
/// partition group. Shutdown waits for it (see [`ControlPlane::tasks`]).
pub(crate) fn spawn_feed_readers(plane: &Arc<ControlPlane>) {
    for (kind, feed) in &plane.feeds {
        let (kind, feed, this) = (*kind, Arc::clone(feed), Arc::clone(plane));
        let reader = async move {
            let plane = this;
            let stop = plane.stop.clone();
            let mut group = None;
            // The stop is taken between two steps: a renewal of the partitions still on its way
            // when the group is left could make this process a member again (on a pool, it may
            // reach the store after the leave). A step that hangs is cut after `STORE_WAIT`.
            let step_cut = async {
                stop.cancelled().await;
                tokio::time::sleep(STORE_WAIT).await;
            };
            tokio::select! {
                () = step_cut => {}
                () = read_feed(kind, &*feed, &plane, &mut group) => {}
            }
            hand_over(kind, &*feed, &plane, group).await;
        };
        plane.tasks.spawn_on(reader, &plane.runtime);
    }
}

/// Announces this replica's jobs of guard kind `kind`; `false` when the store could not take them.
async fn announce(kind: &'static str, feed: &dyn ControlFeed, plane: &ControlPlane) -> bool {
    for chunk in plane.roster(kind).chunks(FEED_BATCH) {
        if let Err(e) = feed.announce(chunk.to_vec()).await {
            tracing::debug!(guard = kind, error = %crate::error::Chain(&e), "could not announce the jobs in the roster; trying again with the next read of the feed");
            return false;
        }
    }
    true
}

/// Attends the store of guard kind `kind` and tells the jobs who is present there; returns how
/// many processes are (`None`: the store could not tell), `before` being the last count.
async fn attend(
    kind: &'static str,
    feed: &dyn ControlFeed,
    presence: &Presence,
    before: Option<usize>,
) -> Option<usize> {
    match feed.attend(presence.me()).await {
        Ok(listed) => {
            presence.heard(kind, Some(&listed));
            let now = presence.count(kind);
            if now != before {
                tracing::debug!(
                    guard = kind,
                    processes = now,
                    "processes present at the store; the shared jobs spread over them"
                );
            }
            now
        }
        Err(e) => {
            presence.heard(kind, None);
            if before.is_some() {
                tracing::debug!(guard = kind, error = %crate::error::Chain(&e), "cannot tell which processes are present at the store; its jobs claim first where they ran last until it can");
            }
            None
        }
    }
}

/// Takes part in partition ownership at the store of guard kind `kind` (docs/design/ownership.md):
/// asks for the partitions this process is named first for among its group, hears who owns
/// each, and tells the jobs of the partitions it gained, so that they walk the fires they left
/// to the owner before. `group` is the group it asked in last: when its jobs changed (one was
/// added or removed), it gives up the partitions of the old group first. Answers when to ask
/// again before the next read, to take over the partitions of an owner that left the group as
/// soon as their leases run out (see [`Presence::take_over_at`](crate::executor::presence::Presence::take_over_at)).
async fn own(
    kind: &'static str,
    feed: &dyn ControlFeed,
    plane: &ControlPlane,
    group: &mut Option<String>,
) -> Option<tokio::time::Instant> {
    let presence = &plane.presence;
    let now = partitions::group_of(plane.running_jobs(kind).iter().map(String::as_str));
    if let Some(old) = group.take().filter(|old| *old != now) {
        // A group this process left is left at once: no member, its partitions given up.
        let _ = tokio::time::timeout(STORE_WAIT, feed.leave(&old, presence.me(), PARTITION_LEASE))
            .await;
        presence.forget_owners(kind);
        plane.tell_owner_changed(kind, None);
    }
    let wanted = presence.wanted(kind);
    let sent = tokio::time::Instant::now();
    let sent_wall = plane.clock.now();
    let read = match tokio::time::timeout(
        STORE_WAIT,
        feed.own(&now, presence.me(), &wanted, PARTITION_LEASE),
    )
    .await
    {
        Ok(Ok(read)) => read,
        Ok(Err(e)) => {
            tracing::debug!(guard = kind, error = %crate::error::Chain(&e), "cannot renew or read the partitions' leases; the jobs of the partitions this process owned are claimed as without ownership once their leases run out, until it can");
            None
        }
        Err(_) => None,
    };
    *group = Some(now);
    let may_own = read
        .as_ref()
        .and_then(|r| r.server_time)
        .is_none_or(|server| clock_agrees(kind, server, sent_wall, sent.elapsed()));
    let answered = tokio::time::Instant::now();
    let take_over = read
        .as_ref()
        .and_then(|r| presence.take_over_at(r, may_own, answered));
    let changed = presence.heard_owners(kind, read, sent, may_own);
    if !changed.is_empty() {
        tracing::debug!(
            guard = kind,
            partitions = changed.len(),
            "partitions changed owner; the jobs of each walk the fires they left to the owner before"
        );
        plane.tell_owner_changed(kind, Some(&changed));
    }
    take_over
}

/// Leaves the partition group at the store of guard kind `kind` while a shard of this process
/// has stalled (`stalled`, see [`Pulses`]; the shards' watcher says so in the log): the shard's
/// jobs neither fire nor decide their fires, and as an owner this process would go on renewing
/// its partitions while the others leave their fires to it. Out of the group, the others own its
/// partitions at their next read and walk the fires they left to it (docs/design/ownership.md,
/// "A stalled shard"); it asks again once the shard runs. Answers whether a shard has stalled.
async fn stall_leaves(
    kind: &'static str,
    feed: &dyn ControlFeed,
    plane: &ControlPlane,
    group: &mut Option<String>,
    stalled: bool,
) -> bool {
    if !stalled {
        return false;
    }
    if let Some(old) = group.take() {
        tracing::debug!(
            guard = kind,
            "a shard of this process has stalled: it leaves its partition group until the shard runs again"
        );
        let _ = tokio::time::timeout(
            STORE_WAIT,
            feed.leave(&old, plane.presence.me(), PARTITION_LEASE),
        )
        .await;
        plane.presence.forget_owners(kind);
        plane.tell_owner_changed(kind, None);
    }
    true
}

/// Whether the store's clock (`server`, read during a round trip of `rtt` sent at `sent` by this
/// process's clock) agrees with this process's within [`OWNER_CLOCK_TOLERANCE`]; warns when not.
fn clock_agrees(
    kind: &'static str,
    server: chrono::DateTime<chrono::Utc>,
    sent: chrono::DateTime<chrono::Utc>,
    rtt: Duration,
) -> bool {
    let rtt = chrono::TimeDelta::from_std(rtt).unwrap_or_default();
    let off = (server - (sent + rtt / 2)).abs();
    let ok = off.to_std().is_ok_and(|off| off <= OWNER_CLOCK_TOLERANCE);
    if !ok {
        tracing::warn!(guard = kind, off_by_ms = off.num_milliseconds(), "this process's clock is off the store's by more than 1 s: it owns no partition and claims the fires of its shared jobs as without ownership; set its clock right (NTP)");
    }
    ok
}

/// Leaves the group at the store of guard kind `kind` at shutdown: this process is no member from
/// now on and its partitions are given up at once, so that the processes that go on own them at
/// their next read, without waiting for its leases or its membership to run out.
async fn hand_over(
    kind: &'static str,
    feed: &dyn ControlFeed,
    plane: &ControlPlane,
    group: Option<String>,
) {
    let Some(group) = group else {
        return;
    };
    let presence = &plane.presence;
    presence.forget_owners(kind);
    let failed = match tokio::time::timeout(
        STORE_WAIT,
        feed.leave(&group, presence.me(), PARTITION_LEASE),
    )
    .await
    {
        Ok(Ok(())) => return,
        Ok(Err(e)) => crate::error::Chain(&e).to_string(),
        Err(_) => format!("no answer within {} s", STORE_WAIT.as_secs()),
    };
    tracing::debug!(guard = kind, error = %failed, "could not hand the partitions over at shutdown; the other processes own them once their leases run out");
}

async fn read_feed(
    kind: &'static str,
    feed: &dyn ControlFeed,
    plane: &ControlPlane,
    group: &mut Option<String>,
) {
    // The roster is written after the first read, which takes the feed's end: other processes
    // address controls to these jobs only once the roster lists them, so those controls lie past
    // this replica's cursor and are read (announced before it, a control made in between was
    // never read here). A store that is down at start gets the roster once it answers.
    let mut announced = false;
    let mut cursor: Option<String> = None;
    let mut failing = false;
    // Reading a feed again from its start (it was recreated or restored), until caught up.
    let mut replaying = false;
    let mut tick = tokio::time::interval(FEED_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut present: Option<usize> = None;
    // When this reader last ran: the process ran then (see `Pulses::stalled`).
    let mut looked = tokio::time::Instant::now();
    loop {
        let ticked = tokio::select! {
            biased;
            () = plane.stop.cancelled() => return,
            ticked = tick.tick() => ticked,
        };
        present = attend(kind, feed, &plane.presence, present).await;
        let now = tokio::time::Instant::now();
        let stalled = plane.pulses.stalled(looked, now, STALL_LIMIT).is_some();
        looked = now;
        if plane.presence.owning() && stall_leaves(kind, feed, plane, group, stalled).await {
            // A stalled shard: no member of any group until it runs again.
        } else if plane.presence.owning() {
            // The next read comes early when a departed owner's lease runs out before it.
            if let Some(at) = own(kind, feed, plane, group)
                .await
                .filter(|at| *at < ticked + FEED_POLL)
            {
                tick.reset_at(at);
            }
        }
        loop {
            // Until the first read works, the feed's end is not known: requests made before it
            // are not replayed.
            let first = cursor.is_none();
            match feed.read(cursor.clone()).await {
                Ok(read) => {
                    if failing {
                        tracing::info!(guard = kind, "control feed readable again");
                        failing = false;
                    }
                    if read.restarted {
                        tracing::warn!(guard = kind, "the control feed was emptied, recreated or restored since it was last read; reading it again from its start, so that the controls made since are not missed (runs asked for are not run twice)");
                        replaying = true;
                    }
                    let full = read.requests.len() >= FEED_BATCH;
                    for request in read.requests {
                        plane.deliver(kind, request, replaying);
                    }
                    cursor = Some(read.cursor);
                    if !full {
                        replaying = false;
                    }
                    if !full || first {
                        break;
                    }
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(guard = kind, error = %crate::error::Chain(&e), "cannot read the control feed; controls made on other replicas reach this one once it can (pauses still hold at every claim)");
                        failing = true;
                    }
                    break;
                }
            }
        }
        if !announced {
            announced = announce(kind, feed, plane).await;
        }
    }
}

/// Why a control ([`Monitor::pause`](crate::Monitor::pause), `resume`, `trigger`, `add`,
/// `remove`) was not carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// No job of this scheduler has this name.
    #[error("no job is named `{0}`; `Monitor::jobs` lists the jobs this process runs")]
    UnknownJob(String),
    /// A job of this name already runs here.
    #[error(
        "a job named `{0}` already runs here; remove it first or give the new one another `name`"
    )]
    DuplicateName(String),
    /// The job's settings are wrong; the message says what to change.
    #[error("job `{job}` cannot be added: {problem}")]
    InvalidJob {
        /// The job.
        job: String,
        /// What is wrong.
        problem: String,
    },
    /// The job's guard does not keep pauses or manual runs (a custom guard that does not
    /// implement [`GuardControls`](crate::guard::GuardControls) and answer it from
    /// [`Guard::controls`](crate::guard::Guard::controls)).
    #[error("the guard of job `{0}` does not support this control; implement `GuardControls` for it and return it from `Guard::controls`")]
    Unsupported(String),
    /// The guard's store could not be reached, refused the request or did not answer in time:
    /// the control may or may not have been stored.
    #[error("the guard of job `{job}` could not confirm the control (it may or may not have been stored); try again, repeating a pause or resume is harmless")]
    Guard {
        /// The job.
        job: String,
        /// What failed.
        #[source]
        source: GuardError,
    },
    /// The job is only watched here (`CRONGUARD_JOBS`) and its guard has no control feed to
    /// hand a run to the replicas that run it.
    #[error("job `{0}` does not run on this replica (`CRONGUARD_JOBS` leaves it out) and its guard cannot hand the run to another one; ask a replica that runs it")]
    NotRunHere(String),
    /// The scheduler has shut down.
    #[error("the scheduler has shut down")]
    Stopped,
}
