//! The simulated shared guard: one job's state on a server, following the Redis guard's contract
//! (docs/operations/redis.md): an atomic claim at the server's instant, the lease expiring on the
//! server's clock, renewal and release by token, the per-fire `last`, the same claimant recognised
//! on a retry, fires far ahead of the server's clock refused (and any ahead of it while the job is busy), per-fire drop reports that decide
//! the fire for every other claimant, abandoned claims recorded as not started, fencing tokens
//! that never go below the server's clock, and the job's fate point with the fires reported missed
//! after a downtime (docs/guide/downtime.md): recorded once, never claimed or reported again.
//! Manual runs are claimed as the script's `manual`, and a pause is the state's `paused` field.

use std::collections::BTreeMap;

use crate::model::Reported;

/// Milliseconds of simulated true time (the server's clock is true time).
pub(super) type Ms = i64;

/// How many recent claims the server remembers (as the Redis guard).
const RECENT_CLAIMS: usize = 8;
/// How long a manual run claimed is remembered at least (`MANUAL_RUNS_KEPT`).
const RUNS_KEPT: Ms = crate::guard::MANUAL_RUNS_KEPT.as_millis() as Ms;

/// How far ahead of the server's clock a claimed fire may lie (as in the Redis guard).
pub(super) const AHEAD_TOLERANCE: Ms = 1_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Req {
    Claim {
        fire: Ms,
        token: String,
        lease: Ms,
        skip: bool,
        replace: bool,
        nonce: u64,
    },
    Renew {
        token: String,
        lease: Ms,
    },
    Release {
        token: String,
    },
    Abandon {
        fire: Ms,
        token: String,
    },
    Report {
        fire: Ms,
        nonce: u64,
    },
    /// Claims manual run `id` (the script's `manual`).
    Manual {
        id: u64,
        token: String,
        lease: Ms,
        requested: Ms,
        grace: Ms,
    },
    /// Reads the job's fate point.
    FatePoint,
    /// Records the missed fires from `first` to `last` unless `last` is not past the job's
    /// misfire `grace` by the server's clock (less the tolerance: the reporter's clock is
    /// ahead); `nonce` is the reporter's, as in [`Req::Report`].
    ReportMissed {
        first: Ms,
        last: Ms,
        grace: Ms,
        nonce: u64,
    },
    /// Partition ownership (the `OWN` script, docs/design/ownership.md): lists process `me` as a
    /// member for `ttl`, takes or renews the job's partition for `lease` if `want` and it is
    /// free, expired or its own, gives it up at once if not `want` and it is its own. With
    /// `leave` (a planned stop, the `LEAVE` script), `me` is removed from the members instead.
    Own {
        me: String,
        want: bool,
        leave: bool,
        lease: Ms,
        ttl: Ms,
        /// The sender's clock when it sent the request.
        alive: Ms,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Resp {
    Acquired {
        fence: u64,
    },
    AlreadyRan,
    ClaimedByAnother,
    Superseded,
    DroppedByAnother,
    Busy {
        first_report: bool,
    },
    Lapsed,
    TooEarly {
        ahead: Ms,
    },
    /// A manual run nobody claimed, asked for this long ago (more than the grace).
    TooLate {
        late: Ms,
    },
    /// The job is paused (when, by whom).
    Paused {
        pause: (Ms, String),
        first_report: bool,
    },
    Renewed,
    CancelRequested,
    Lost,
    Done,
    Reported(Reported),
    /// The fate point (before the report, for [`Req::ReportMissed`]).
    Point(Option<Ms>),
    /// The request failed at the server (a report of missed fires ahead of its clock).
    Refused,
    /// The partition's live owner, its epoch, how much of its lease is left and the owner's
    /// clock when it sent its last renewal, and the members present.
    Owned {
        owner: Option<(String, u64, Ms, Ms)>,
        members: Vec<String>,
        /// The server's clock.
        now: Ms,
    },
}

/// One job's keys.
#[derive(Debug, Default, Clone)]
pub(super) struct JobState {
    last: Option<Ms>,
    /// The last [`RECENT_CLAIMS`] claims (fire, token), written at `claimed % RECENT_CLAIMS`:
    /// a retry is recognised even after a later fire was claimed, and a fire nobody claimed is
    /// told apart from one that ran.
    ring: Vec<Option<(Ms, String)>>,
    /// Who claimed `last` (`holder`).
    holder: Option<String>,
    /// How many claims were ever made: while the recent claims hold all of them, a fire that is
    /// not among them was never claimed.
    claimed: u64,
    fence: u64,
    lapsed: Option<Ms>,
    lock: Option<(String, Ms)>,
    cancel: Option<(String, Ms)>,
    reported: BTreeMap<Ms, u64>,
    /// The newest fire with a report record (`rep`: a claim that clears its own report leaves it).
    rep: Option<Ms>,
    /// The last report applied was of a fire the guard could not tell missed from claimed (see
    /// `Req::Report`): the reporter's own word.
    pub(super) unsure: bool,
    /// The fires up to here were reported missed (`gone`).
    gone: Option<Ms>,
    /// The fate point when the newest missed fires were recorded (`gf`), and the newest missed
    /// fire before them (`gb`): the fires between were not reported missed; `None`: every fire
    /// up to `gone` was.
    gone_from: Option<Ms>,
    gone_before: Option<Ms>,
    /// The answer each report of missed fires got, by reporter and last fire (the keys
    /// `missed:<nonce>:<last>`), for a retry whose first try took effect unheard.
    missed_answers: BTreeMap<(u64, Ms), Option<Ms>>,
    /// The tokens of the newest eight claims given up before they arrived (`ab`): refused.
    abandoned: Vec<String>,
    /// The last report of missed fires was answered as an earlier try of it: nothing applied.
    pub(super) repeated: bool,
    /// The job's pause (`paused`): when, by whom.
    pub(super) paused: Option<(Ms, String)>,
    /// Who claimed each manual run remembered (`m:<id>`).
    manual: BTreeMap<u64, String>,
    /// The manual runs remembered, by their request (the sorted set `runs`).
    runs: BTreeMap<u64, Ms>,
    /// The newest request of a manual run forgotten (`mf`).
    forgotten: Option<Ms>,
    /// The job's partition lease: owner, epoch, expiry, the owner's clock at its last renewal
    /// (the group's `leases` hash).
    partition: Option<(String, u64, Ms, Ms)>,
    /// The group's members and when each was last seen (the group's `members` set).
    members: BTreeMap<String, Ms>,
}

impl JobState {
    fn lock_holder(&self, now: Ms) -> Option<&str> {
        self.lock
            .as_ref()
            .filter(|(_, until)| *until > now)
            .map(|(t, _)| t.as_str())
    }

    /// Applies a request at server time `now`.
    pub(super) fn apply(&mut self, req: &Req, now: Ms) -> Resp {
        match req {
            Req::Own {
                me,
                want,
                leave,
                lease,
                ttl,
                alive,
            } => {
                // Line by line as the `OWN` script of the Redis guard (`LEAVE` with `leave`).
                if *leave {
                    self.members.remove(me);
                } else {
                    self.members.insert(me.clone(), now);
                }
                self.members.retain(|_, seen| *seen >= now - ttl);
                // A lease never lasts longer than its length from now: after the server's clock
                // stepped back, one taken before the step would otherwise outlast its owner.
                if let Some((_, _, expiry, _)) = &mut self.partition {
                    *expiry = (*expiry).min(now + lease);
                }
                match &mut self.partition {
                    Some((owner, epoch, expiry, seen)) if *want => {
                        if *expiry <= now || owner != me {
                            if *expiry <= now {
                                // An epoch is the server's clock when the owner took it, or just
                                // above the one before.
                                *epoch = (*epoch + 1).max(now.max(0) as u64);
                                *owner = me.clone();
                                *expiry = now + lease;
                                *seen = *alive;
                            }
                        } else {
                            *expiry = now + lease;
                            *seen = *alive;
                        }
                    }
                    None if *want => {
                        self.partition = Some((me.clone(), now.max(1) as u64, now + lease, *alive));
                    }
                    Some((owner, _, expiry, _)) if owner == me && *expiry > now => *expiry = now,
                    _ => {}
                }
                let owner = self
                    .partition
                    .as_ref()
                    .filter(|(_, _, expiry, _)| *expiry > now)
                    .map(|(owner, epoch, expiry, seen)| {
                        (owner.clone(), *epoch, expiry - now, *seen)
                    });
                Resp::Owned {
                    owner,
                    members: self.members.keys().cloned().collect(),
                    now,
                }
            }
            Req::Claim {
                fire,
                token,
                lease,
                skip,
                replace,
                nonce,
            } => {
                // Line by line as `claim` in the Redis guard's batch script.
                if *fire > now + AHEAD_TOLERANCE {
                    return Resp::TooEarly { ahead: fire - now };
                }
                if self.abandoned.contains(token) {
                    // Given up by its claimant before it arrived.
                    return Resp::Lapsed;
                }
                let stored = self.last;
                let last = stored.filter(|l| *l <= now + AHEAD_TOLERANCE);
                let ignored = stored.is_some() && last.is_none();
                let (claimed_by, oldest) = if last == Some(*fire) {
                    (self.holder.clone(), None)
                } else if stored.is_some_and(|l| l > *fire) {
                    self.recent_claimant(*fire)
                } else {
                    (None, None)
                };
                if claimed_by.as_deref() == Some(token.as_str()) {
                    if self.lock_holder(now) != Some(token) {
                        if last == Some(*fire) {
                            self.lapsed = Some(*fire);
                        }
                        return Resp::Lapsed;
                    }
                    self.lock = Some((token.clone(), now + lease));
                    return Resp::Acquired { fence: self.fence };
                }
                if claimed_by.is_some() {
                    return Resp::ClaimedByAnother;
                }
                if ignored
                    && oldest.is_some_and(|o| *fire < o)
                    && self.claimed > RECENT_CLAIMS as u64
                {
                    return Resp::AlreadyRan;
                }
                if last.is_some_and(|l| l >= *fire) {
                    // A fire among the recent claims that nobody claimed was passed over; an
                    // older one is simply past (a process whose clock is far behind stays quiet).
                    let all_known = self.claimed <= RECENT_CLAIMS as u64;
                    let passed_over = last.is_some_and(|l| l > *fire)
                        && (all_known || oldest.is_some_and(|o| *fire > o));
                    if passed_over {
                        return Resp::Superseded;
                    }
                    return Resp::AlreadyRan;
                }
                // Reported missed while no process ran the job: decided, never started — unless
                // this claimant reported the fire itself first (a busy answer it never got).
                let own_report = self.reported.get(fire) == Some(nonce);
                if !own_report && self.reported_missed(*fire) {
                    return Resp::DroppedByAnother;
                }
                // A paused fire is dropped whatever the overlap, its report recorded as for a
                // busy skip; ahead of the server's clock it is left for the claim at its instant.
                if let Some(pause) = self.paused.clone() {
                    if *fire > now {
                        return Resp::TooEarly { ahead: fire - now };
                    }
                    return Resp::Paused {
                        pause,
                        first_report: self.report(*fire, *nonce),
                    };
                }
                if self.reported.get(fire).is_some_and(|by| by != nonce) {
                    return Resp::DroppedByAnother;
                }
                if let Some(holder) = self.lock_holder(now).map(str::to_owned) {
                    if *fire > now {
                        // Ahead of the server's clock, a busy fire is left for the claim at its
                        // instant (docs/design/standby.md).
                        return Resp::TooEarly { ahead: fire - now };
                    }
                    if *replace {
                        self.cancel = Some((holder, now + lease));
                    }
                    if *skip {
                        return Resp::Busy {
                            first_report: self.report(*fire, *nonce),
                        };
                    }
                    return Resp::Busy {
                        first_report: false,
                    };
                }
                self.lock = Some((token.clone(), now + lease));
                if stored.is_none_or(|l| l <= *fire) {
                    // `last` never moves back: an older fire's claim is in the ring only.
                    self.last = Some(*fire);
                    self.holder = Some(token.clone());
                }
                self.reported.remove(fire);
                if stored.is_some_and(|l| l > *fire) {
                    self.remember_older(*fire, token);
                } else {
                    let slot = (self.claimed % RECENT_CLAIMS as u64) as usize;
                    if self.ring.len() <= slot {
                        self.ring.resize(slot + 1, None);
                    }
                    self.ring[slot] = Some((*fire, token.clone()));
                }
                self.claimed += 1;
                self.fence = (self.fence + 1).max(u64::try_from(now).unwrap_or(0) * 1_000);
                Resp::Acquired { fence: self.fence }
            }
            Req::Renew { token, lease } => {
                if self.lock_holder(now) != Some(token) {
                    return Resp::Lost;
                }
                self.lock = Some((token.clone(), now + lease));
                let asked = self
                    .cancel
                    .as_ref()
                    .is_some_and(|(t, until)| t == token && *until > now);
                if asked {
                    Resp::CancelRequested
                } else {
                    Resp::Renewed
                }
            }
            Req::Release { token } => {
                if self.lock_holder(now) == Some(token) {
                    self.lock = None;
                    self.cancel = None;
                }
                Resp::Done
            }
            Req::Abandon { fire, token } => {
                let claimant = if self.last == Some(*fire) {
                    self.holder.clone()
                } else {
                    self.recent_claimant(*fire).0
                };
                let ours = claimant.as_deref() == Some(token.as_str());
                if !ours {
                    // The claim has not arrived (it may still): it will be refused. The newest
                    // eight such claims are kept.
                    self.abandoned.retain(|t| t != token);
                    self.abandoned.insert(0, token.clone());
                    self.abandoned.truncate(8);
                }
                if ours && self.last == Some(*fire) {
                    self.lapsed = Some(*fire);
                }
                if ours && self.lock_holder(now) == Some(token) {
                    self.lock = None;
                    self.cancel = None;
                }
                Resp::Done
            }
            Req::Report { fire, nonce } => {
                self.unsure = false;
                if *fire > now + AHEAD_TOLERANCE {
                    // From a clock that is ahead: reported on its own word, nothing recorded.
                    return Resp::Reported(Reported::First);
                }
                // Another claimant's claim of the fire took effect: it ran there, or that
                // claimant reports it.
                // This claimant's own claim of it: the fire is its own to report, whatever was
                // recorded since.
                let own = format!("{nonce:x}:");
                match self.claimant(*fire).map(|t| t.starts_with(&own)) {
                    Some(true) => {
                        self.report(*fire, *nonce);
                        return Resp::Reported(Reported::First);
                    }
                    Some(false) => return Resp::Reported(Reported::ClaimedElsewhere),
                    None => {}
                }
                // Reported missed: a fire nobody claimed, as a claim tells it (a claimed fire the
                // ring forgot is not; its report is recorded). Its own report first (a busy
                // answer it never got), as the missed fires after.
                let (_, oldest) = self.recent_claimant(*fire);
                let unclaimed = self.last.is_none_or(|l| *fire > l)
                    || self.claimed <= RECENT_CLAIMS as u64
                    || oldest.is_some_and(|o| *fire > o);
                let missed = self.reported.get(fire) != Some(nonce) && self.reported_missed(*fire);
                if missed && unclaimed {
                    return Resp::Reported(Reported::ByAnother);
                }
                // Reported missed, or claimed and forgotten since: the guard cannot tell, and
                // records the report (twice rather than never).
                self.unsure = missed;
                Resp::Reported(match self.report(*fire, *nonce) {
                    true => Reported::First,
                    false => Reported::ByAnother,
                })
            }
            Req::Manual {
                id,
                token,
                lease,
                requested,
                grace,
            } => self.manual(*id, token, *lease, *requested, *grace, now),
            Req::FatePoint => Resp::Point(self.fate_point(now)),
            Req::ReportMissed {
                first,
                last,
                grace,
                nonce,
            } => {
                self.repeated = self.missed_answers.contains_key(&(*nonce, *last));
                if let Some(kept) = self.missed_answers.get(&(*nonce, *last)) {
                    return Resp::Point(*kept);
                }
                if *last + *grace > now + AHEAD_TOLERANCE {
                    // Written by a clock that is ahead: recorded, it would move the fate point
                    // past fires still open elsewhere, or drop fires to come.
                    return Resp::Refused;
                }
                let point = self.fate_point(now);
                self.missed_answers.insert((*nonce, *last), point);
                if point.is_none_or(|p| p < *last) {
                    // The fires after the point from `first` on: a fire before `first` still
                    // open in a process is that process's to decide. A report that goes on from
                    // the missed fires before extends them.
                    let from = point.map_or(first - 1, |p| p.max(first - 1));
                    if self.gone.is_some() && point == self.gone && Some(from) == point {
                        self.gone = Some(*last);
                    } else {
                        self.gone_from = Some(from);
                        self.gone_before = self.gone;
                        self.gone = Some(*last);
                    }
                }
                Resp::Point(point)
            }
        }
    }

    /// Line by line as `manual` in the Redis guard's batch script: a manual run takes the lock
    /// and a fencing token like a claim, and is remembered apart from the scheduled fires for
    /// the grace by the server's clock; the pause is not read.
    fn manual(
        &mut self,
        id: u64,
        token: &str,
        lease: Ms,
        requested: Ms,
        grace: Ms,
        now: Ms,
    ) -> Resp {
        let claimed_by = self.manual.get(&id).cloned();
        if claimed_by.as_deref() == Some(token) {
            if self.lock_holder(now) != Some(token) {
                return Resp::Lapsed;
            }
            self.lock = Some((token.to_owned(), now + lease));
            return Resp::Acquired { fence: self.fence };
        }
        if claimed_by.is_some() {
            return Resp::AlreadyRan;
        }
        if self.forgotten.is_some_and(|f| requested <= f) {
            return Resp::AlreadyRan;
        }
        if now - requested > grace {
            return Resp::TooLate {
                late: now - requested,
            };
        }
        if self.lock_holder(now).is_some() {
            return Resp::Busy { first_report: true };
        }
        self.lock = Some((token.to_owned(), now + lease));
        self.fence = (self.fence + 1).max(u64::try_from(now).unwrap_or(0) * 1_000);
        let old: Vec<(u64, Ms)> = self
            .runs
            .iter()
            .filter(|(_, at)| **at < now - grace.max(RUNS_KEPT))
            .map(|(id, at)| (*id, *at))
            .collect();
        for (old, at) in old {
            self.manual.remove(&old);
            self.runs.remove(&old);
            self.forgotten = Some(self.forgotten.map_or(at, |f| f.max(at)));
        }
        // Kept for the grace from the later of its request and this claim: a claimant whose
        // clock is behind stamps the request early, and it must not be forgotten early.
        self.runs.insert(id, requested.max(now));
        self.manual.insert(id, token.to_owned());
        Resp::Acquired { fence: self.fence }
    }

    /// Who claimed `fire`, as far as the recent claims tell (as the Redis guard: the ring is read
    /// only when a later fire was claimed since).
    fn claimant(&self, fire: Ms) -> Option<String> {
        match self.last {
            Some(l) if l == fire => self.holder.clone(),
            Some(l) if l > fire => self.recent_claimant(fire).0,
            _ => None,
        }
    }

    /// Remembers the claim of a fire older than `last` (the server's clock went back): the ring
    /// keeps the newest fires claimed, rewritten in fire order so that the next claims overwrite
    /// the oldest first (as `remember_older` in the Redis guard's script).
    fn remember_older(&mut self, fire: Ms, token: &str) {
        let mut entries: Vec<(Ms, String)> = self.ring.iter().flatten().cloned().collect();
        entries.push((fire, token.to_owned()));
        entries.sort_by_key(|(f, _)| *f);
        let keep = entries.len().min(RECENT_CLAIMS);
        let entries = entries.split_off(entries.len() - keep);
        let next = ((self.claimed + 1) % RECENT_CLAIMS as u64) as usize;
        self.ring = vec![None; RECENT_CLAIMS];
        // The oldest kept goes where the next claim writes, unless the ring has room.
        let start = if keep < RECENT_CLAIMS { 0 } else { next };
        for (i, entry) in entries.into_iter().enumerate() {
            self.ring[(start + i) % RECENT_CLAIMS] = Some(entry);
        }
    }

    /// Who claimed `fire` among the recent claims, and the oldest fire they hold (as
    /// `recent_claimant` in the Redis guard's script: a ring written in claim order).
    fn recent_claimant(&self, fire: Ms) -> (Option<String>, Option<Ms>) {
        let mut who = None;
        let mut oldest: Option<Ms> = None;
        for (f, token) in self.ring.iter().flatten() {
            if *f == fire {
                who = Some(token.clone());
            }
            oldest = Some(oldest.map_or(*f, |o| o.min(*f)));
        }
        (who, oldest)
    }

    /// How many claims of scheduled fires the server granted anew.
    pub(super) fn claims_made(&self) -> u64 {
        self.claimed
    }

    /// Whether the store holds any record of the job.
    pub(super) fn has_record(&self) -> bool {
        self.last.is_some() || self.rep.is_some() || self.gone.is_some()
    }

    /// Whether `fire` was reported missed: up to `gone`, and not between the missed fires before
    /// (`gb`) and the fate point the newest were recorded from (`gf`).
    fn reported_missed(&self, fire: Ms) -> bool {
        self.gone.is_some_and(|g| g >= fire)
            && (self.gone_from.is_none_or(|f| fire > f)
                || self.gone_before.is_some_and(|b| fire <= b))
    }

    /// The newest fire claimed (also one given up), reported dropped or reported missed, also
    /// when it lies ahead of the server's clock (as the Redis guard).
    pub(super) fn fate_point(&self, _now: Ms) -> Option<Ms> {
        [self.last, self.rep, self.gone].into_iter().flatten().max()
    }

    fn report(&mut self, fire: Ms, nonce: u64) -> bool {
        match self.reported.get(&fire) {
            Some(by) => *by == nonce,
            None => {
                self.reported.insert(fire, nonce);
                self.rep = self.rep.max(Some(fire));
                true
            }
        }
    }

    /// What `last_claimed` answers: the last claimed fire, unless it was given up unstarted.
    pub(super) fn last_claimed(&self) -> Option<Ms> {
        self.last.filter(|l| self.lapsed != Some(*l))
    }
}
