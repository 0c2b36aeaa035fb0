//! The simulated shared guard: one job's state on a server, following the Redis guard's contract
//! (docs/operations/redis.md): an atomic claim at the server's instant, the lease expiring on the
//! server's clock, renewal and release by token, the per-fire `last`, the same claimant recognised
//! on a retry, fires far ahead of the server's clock refused (and any ahead of it while the job is busy), per-fire drop reports that decide
//! the fire for every other claimant, abandoned claims recorded as not started, fencing tokens
//! that never go below the server's clock, and the job's fate point with the fires reported missed
//! after a downtime (docs/guide/downtime.md): recorded once, never claimed or reported again.

use std::collections::BTreeMap;

use crate::model::Reported;

/// Milliseconds of simulated true time (the server's clock is true time).
pub(super) type Ms = i64;

/// How many recent claims the server remembers (as the Redis guard).
const RECENT_CLAIMS: usize = 8;

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
    /// Reads the job's fate point.
    FatePoint,
    /// Records the fires up to `last` as missed (`first` is for the trace: the Redis guard sends
    /// only `last`).
    ReportMissed {
        first: Ms,
        last: Ms,
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
    Renewed,
    CancelRequested,
    Lost,
    Done,
    Reported(Reported),
    /// The fate point (before the report, for [`Req::ReportMissed`]).
    Point(Option<Ms>),
    /// The request failed at the server (a report of missed fires ahead of its clock).
    Refused,
}

/// One job's keys.
#[derive(Debug, Default, Clone)]
pub(super) struct JobState {
    last: Option<Ms>,
    /// Who claimed the last [`RECENT_CLAIMS`] fires: a retry is recognised even after a later
    /// fire was claimed, and a fire nobody claimed is told apart from one that ran.
    claims: BTreeMap<Ms, String>,
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
    /// The fires up to here were reported missed (`gone`).
    gone: Option<Ms>,
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
            Req::Claim {
                fire,
                token,
                lease,
                skip,
                replace,
                nonce,
            } => {
                if *fire > now + AHEAD_TOLERANCE {
                    return Resp::TooEarly { ahead: fire - now };
                }
                if self.claims.get(fire).is_some_and(|t| t == token) {
                    if self.lock_holder(now) == Some(token) {
                        self.lock = Some((token.clone(), now + lease));
                        return Resp::Acquired { fence: self.fence };
                    }
                    if self.last == Some(*fire) {
                        self.lapsed = Some(*fire);
                    }
                    return Resp::Lapsed;
                }
                let last = self.last.filter(|l| *l <= now + AHEAD_TOLERANCE);
                if last.is_some_and(|l| l >= *fire) && self.claims.contains_key(fire) {
                    return Resp::ClaimedByAnother;
                }
                if last.is_some_and(|l| l >= *fire) {
                    // A fire among the recent claims that nobody claimed was passed over; an
                    // older one is simply past (a process whose clock is far behind stays quiet).
                    let oldest = self.claims.keys().next().copied();
                    let all_known = self.claimed <= RECENT_CLAIMS as u64;
                    let passed_over = last.is_some_and(|l| l > *fire)
                        && (all_known || oldest.is_some_and(|o| *fire > o))
                        && !self.claims.contains_key(fire);
                    if passed_over {
                        return Resp::Superseded;
                    }
                    return Resp::AlreadyRan;
                }
                // Reported missed while no process ran the job: decided, never started — unless
                // this claimant reported the fire itself first (a busy answer it never got).
                let own_report = self.reported.get(fire) == Some(nonce);
                if !own_report
                    && self
                        .gone
                        .is_some_and(|g| g >= *fire && g <= now + AHEAD_TOLERANCE)
                {
                    return Resp::DroppedByAnother;
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
                self.last = Some(*fire);
                self.reported.remove(fire);
                self.claims.insert(*fire, token.clone());
                self.claimed += 1;
                while self.claims.len() > RECENT_CLAIMS {
                    self.claims.pop_first();
                }
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
                let ours = self.claims.get(fire).is_some_and(|t| t == token);
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
                if *fire > now + AHEAD_TOLERANCE {
                    // From a clock that is ahead: reported on its own word, nothing recorded.
                    return Resp::Reported(Reported::First);
                }
                // Another claimant's claim of the fire took effect: it ran there, or that
                // claimant reports it.
                let own = format!("{nonce:x}:");
                if self.claimant(*fire).is_some_and(|t| !t.starts_with(&own)) {
                    return Resp::Reported(Reported::ClaimedElsewhere);
                }
                // Its own report first (a busy answer it never got), as the missed fires after.
                if self.reported.get(fire) != Some(nonce) && self.gone.is_some_and(|g| g >= *fire) {
                    return Resp::Reported(Reported::ByAnother);
                }
                Resp::Reported(match self.report(*fire, *nonce) {
                    true => Reported::First,
                    false => Reported::ByAnother,
                })
            }
            Req::FatePoint => Resp::Point(self.fate_point(now)),
            Req::ReportMissed { last, .. } => {
                if *last > now + AHEAD_TOLERANCE {
                    // Written by a clock that is ahead: recorded, it would drop fires to come.
                    return Resp::Refused;
                }
                let point = self.fate_point(now);
                if point.is_none_or(|p| p < *last) {
                    self.gone = Some(*last);
                }
                Resp::Point(point)
            }
        }
    }

    /// Who claimed `fire`, as far as the recent claims tell (as the Redis guard: the ring is read
    /// only when a later fire was claimed since).
    fn claimant(&self, fire: Ms) -> Option<&str> {
        self.last
            .filter(|l| *l >= fire)
            .and_then(|_| self.claims.get(&fire))
            .map(String::as_str)
    }

    /// Whether the store holds any record of the job.
    pub(super) fn has_record(&self) -> bool {
        self.last.is_some() || self.rep.is_some() || self.gone.is_some()
    }

    /// The newest fire claimed (also one given up), reported dropped or reported missed, left
    /// out what lies further ahead of the server's clock than a claim may (as the Redis guard).
    pub(super) fn fate_point(&self, now: Ms) -> Option<Ms> {
        [self.last, self.rep, self.gone]
            .into_iter()
            .flatten()
            .filter(|v| *v <= now + AHEAD_TOLERANCE)
            .max()
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
