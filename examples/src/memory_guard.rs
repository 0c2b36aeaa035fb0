//! A guard of one's own, written against cronguard's public [`Guard`] trait: every job's claims,
//! leases and reports in memory, shared by the guard values of one process. It coordinates the
//! jobs of a single process only — it shows the contract, it is not a backend to deploy — and it
//! passes the same conformance suite as the built-in guards (`examples/tests/custom_guard.rs`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronguard::guard::{Claim, DropReport, Guard, GuardError, GuardSpec, Lease, Renewal};
use cronguard::Overlap;
use tokio::time::Instant;

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'static>>;

/// How many recent claims a job remembers, to recognise a retried claim.
const RECENT: usize = 8;

/// The state of one job.
#[derive(Default)]
struct JobState {
    last: Option<DateTime<Utc>>,
    fence: u64,
    /// The claimant of `last`.
    holder: String,
    /// The lease: its claimant and when it runs out.
    lease: Option<(String, Instant)>,
    /// A holder another claimant asked to stop (`overlap = "replace"`).
    cancel: Option<String>,
    /// A last claimed fire given up unstarted.
    lapsed: Option<DateTime<Utc>>,
    recent: VecDeque<(DateTime<Utc>, String)>,
    /// Who reported each dropped fire first.
    reports: HashMap<DateTime<Utc>, String>,
    /// The fires up to here were reported missed while no process ran the job...
    missed_through: Option<DateTime<Utc>>,
    /// ...but not those after `missed_before` (the missed fires before) up to `missed_from` (the
    /// newest were recorded after it: the fate point, or the reporter's first fire if later):
    /// such a fire may still be open in a process, which reports it.
    missed_from: Option<DateTime<Utc>>,
    missed_before: Option<DateTime<Utc>>,
}

impl JobState {
    /// Who claimed `fire`: the holder of the last claim, or one of the recent claims.
    fn claimant(&self, fire: DateTime<Utc>) -> Option<String> {
        match self.last {
            Some(last) if last == fire => Some(self.holder.clone()),
            Some(last) if last > fire => self
                .recent
                .iter()
                .find(|(f, _)| *f == fire)
                .map(|(_, t)| t.clone()),
            _ => None,
        }
    }

    /// The newest fire up to which every fire has a fate: claimed, reported, or reported missed.
    fn fate_point(&self) -> Option<DateTime<Utc>> {
        let newest_report = self.reports.keys().max().copied();
        [self.last, newest_report, self.missed_through]
            .into_iter()
            .flatten()
            .max()
    }

    /// Whether `fire` was reported missed and no claim took it.
    fn missed(&self, fire: DateTime<Utc>) -> bool {
        self.missed_through.is_some_and(|m| fire <= m)
            && (self.missed_from.is_none_or(|f| fire > f)
                || self.missed_before.is_some_and(|b| fire <= b))
            && self.last.is_none_or(|l| fire > l)
    }
}

/// The store every guard value of a [`MemoryGuards`] shares.
#[derive(Clone, Default)]
pub struct MemoryGuards {
    jobs: Arc<Mutex<HashMap<String, JobState>>>,
}

impl MemoryGuards {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A guard value for a job: what `Builder::custom_guard` asks of a factory.
    pub fn guard(&self, spec: &GuardSpec) -> Arc<dyn Guard> {
        Arc::new(MemoryGuard {
            store: self.clone(),
            job: spec.job.clone(),
            nonce: format!("{:016x}", rand_u64()),
            lease: spec.lease,
            overlap: spec.overlap,
        })
    }

    fn with<T>(&self, job: &str, f: impl FnOnce(&mut JobState) -> T) -> T {
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        f(jobs.entry(job.to_owned()).or_default())
    }
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .elapsed()
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

struct MemoryGuard {
    store: MemoryGuards,
    job: String,
    nonce: String,
    lease: Duration,
    overlap: Overlap,
}

impl MemoryGuard {
    fn token(&self, fire: DateTime<Utc>) -> String {
        format!("{}:{}", self.nonce, fire.timestamp_millis())
    }
}

impl Guard for MemoryGuard {
    fn claim(&self, fire: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
        let token = self.token(fire);
        let sent_at = Instant::now();
        let (lease, overlap, store, job) = (
            self.lease,
            self.overlap,
            self.store.clone(),
            self.job.clone(),
        );
        let nonce = self.nonce.clone();
        let answer = self.store.with(&self.job, |s| {
            let now = Instant::now();
            let held = s.lease.clone().filter(|(_, until)| *until > now);
            let claimed_by = s.claimant(fire);
            if claimed_by.as_deref() == Some(token.as_str()) {
                if held.as_ref().map(|(t, _)| t) != Some(&token) {
                    if s.last == Some(fire) {
                        s.lapsed = Some(fire);
                    }
                    return Err(Claim::Lapsed);
                }
                s.lease = Some((token.clone(), now + lease));
                return Ok(s.fence);
            }
            if let Some(last) = s.last.filter(|l| *l >= fire) {
                let oldest = s.recent.iter().map(|(f, _)| *f).min();
                if claimed_by.is_some() {
                    return Err(Claim::ClaimedByAnother);
                }
                let passed_over = last > fire && oldest.is_some_and(|o| fire > o);
                return Err(if passed_over {
                    Claim::Superseded
                } else {
                    Claim::AlreadyRan
                });
            }
            // Another claimant's report of this fire decides it: it does not run here either; so
            // does a report of it as missed, unless this claimant's own report came first.
            let own_report = s.reports.get(&fire).is_some_and(|by| *by == nonce);
            if s.reports.get(&fire).is_some_and(|by| *by != nonce)
                || (s.missed(fire) && !own_report)
            {
                return Err(Claim::DroppedByAnother);
            }
            if let Some((holder, _)) = held {
                if overlap == Overlap::Replace {
                    s.cancel = Some(holder);
                }
                let first_report = overlap == Overlap::Skip
                    && s.reports.entry(fire).or_insert_with(|| nonce.clone()) == &nonce;
                return Err(Claim::Busy { first_report });
            }
            s.fence += 1;
            s.last = Some(fire);
            // This claimant's own report of the fire (a busy answer it never got) gives way.
            s.reports.remove(&fire);
            s.holder = token.clone();
            s.lease = Some((token.clone(), now + lease));
            s.cancel = None;
            s.recent.push_back((fire, token.clone()));
            if s.recent.len() > RECENT {
                s.recent.pop_front();
            }
            Ok(s.fence)
        });
        let claim = match answer {
            Ok(fencing_token) => Claim::Acquired(Box::new(MemoryLease {
                store,
                job,
                token,
                fencing_token,
                lease,
                sent_at,
            })),
            Err(other) => other,
        };
        Box::pin(async move { Ok(claim) })
    }

    fn report_drop(&self, fire: DateTime<Utc>) -> BoxFuture<Result<DropReport, GuardError>> {
        let own = format!("{}:", self.nonce);
        let answer = self.store.with(&self.job, |s| {
            // Another claimant's claim of the fire took effect: it ran there, or that claimant
            // reports it. This claimant's own claim makes the fire its own to report.
            let claimed_by = s.claimant(fire);
            match claimed_by {
                Some(token) if !token.starts_with(&own) => return DropReport::ClaimedElsewhere,
                Some(_) => {
                    s.reports.entry(fire).or_insert_with(|| self.nonce.clone());
                    return DropReport::First;
                }
                None => {}
            }
            let first = !s.missed(fire)
                && s.reports.entry(fire).or_insert_with(|| self.nonce.clone()) == &self.nonce;
            if first {
                DropReport::First
            } else {
                DropReport::ReportedElsewhere
            }
        });
        Box::pin(async move { Ok(answer) })
    }

    fn abandon(&self, fire: DateTime<Utc>) -> BoxFuture<Result<(), GuardError>> {
        let token = self.token(fire);
        self.store.with(&self.job, |s| {
            let ours = (s.last == Some(fire) && s.holder == token)
                || s.recent.iter().any(|(f, t)| *f == fire && *t == token);
            if !ours {
                return;
            }
            if s.last == Some(fire) {
                s.lapsed = Some(fire);
            }
            if s.lease.as_ref().is_some_and(|(t, _)| *t == token) {
                s.lease = None;
                s.cancel = None;
            }
        });
        Box::pin(async { Ok(()) })
    }

    fn fate_point(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let point = self.store.with(&self.job, |s| s.fate_point());
        Box::pin(async move { Ok(point) })
    }

    fn report_missed(
        &self,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
    ) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let before = self.store.with(&self.job, |s| {
            let before = s.fate_point();
            if before.is_none_or(|p| p < last) {
                // The fires recorded are those after the fate point from `first` on: a fire
                // before `first` still open in a process is that process's to decide. A report
                // that goes on from the missed fires before extends them.
                let just_before_first = first - chrono::TimeDelta::nanoseconds(1);
                let from = before.map_or(just_before_first, |p| p.max(just_before_first));
                if before.is_none() || before != s.missed_through || Some(from) != before {
                    s.missed_from = Some(from);
                    s.missed_before = s.missed_through;
                }
                s.missed_through = Some(last);
            }
            before
        });
        Box::pin(async move { Ok(before) })
    }

    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let last = self
            .store
            .with(&self.job, |s| s.last.filter(|l| s.lapsed != Some(*l)));
        Box::pin(async move { Ok(last) })
    }
}

struct MemoryLease {
    store: MemoryGuards,
    job: String,
    token: String,
    fencing_token: u64,
    lease: Duration,
    sent_at: Instant,
}

impl Lease for MemoryLease {
    fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    fn expiry(&self) -> Option<(Duration, Instant)> {
        Some((self.lease, self.sent_at))
    }

    fn renew(&self) -> BoxFuture<Result<Renewal, GuardError>> {
        let renewal = self.store.with(&self.job, |s| {
            let now = Instant::now();
            match &s.lease {
                Some((holder, until)) if *holder == self.token && *until > now => {
                    s.lease = Some((self.token.clone(), now + self.lease));
                    if s.cancel.as_deref() == Some(self.token.as_str()) {
                        Renewal::CancelRequested
                    } else {
                        Renewal::Renewed
                    }
                }
                _ => Renewal::Lost,
            }
        });
        Box::pin(async move { Ok(renewal) })
    }

    fn release(self: Box<Self>) -> BoxFuture<Result<(), GuardError>> {
        self.store.with(&self.job, |s| {
            if s.lease.as_ref().is_some_and(|(t, _)| *t == self.token) {
                s.lease = None;
                s.cancel = None;
            }
        });
        Box::pin(async { Ok(()) })
    }
}
