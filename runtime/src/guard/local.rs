//! `lock = "local"`: `max_instances` slots and the last claimed fire, in memory.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};

use super::{Claim, Guard, GuardError, Lease};
use crate::registry::BoxFuture;

pub(crate) struct LocalGuard(Arc<Slots>);

struct Slots {
    max_instances: u32,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    last_claimed: Option<DateTime<Utc>>,
    last_token: u64,
    running: u32,
}

impl Slots {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl LocalGuard {
    pub(crate) fn new(max_instances: u32) -> Self {
        LocalGuard(Arc::new(Slots {
            max_instances,
            state: Mutex::new(State::default()),
        }))
    }

    fn claim_sync(&self, fire_time: DateTime<Utc>) -> Claim {
        let mut state = self.0.state();
        if state.last_claimed.is_some_and(|last| last >= fire_time) {
            return Claim::AlreadyRan;
        }
        if state.running >= self.0.max_instances {
            return Claim::Busy { first_report: true };
        }
        state.running += 1;
        state.last_claimed = Some(fire_time);
        state.last_token += 1;
        Claim::Acquired(Box::new(LocalLease {
            slots: Arc::clone(&self.0),
            token: state.last_token,
        }))
    }
}

impl Guard for LocalGuard {
    fn claim(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
        let claim = self.claim_sync(fire_time);
        Box::pin(async move { Ok(claim) })
    }

    fn claim_now(&self, fire_time: DateTime<Utc>) -> Option<Result<Claim, GuardError>> {
        Some(Ok(self.claim_sync(fire_time)))
    }

    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let last = self.0.state().last_claimed;
        Box::pin(async move { Ok(last) })
    }
}

/// Frees its slot when dropped, released or not (a panic cannot leak a slot).
struct LocalLease {
    slots: Arc<Slots>,
    token: u64,
}

impl Drop for LocalLease {
    fn drop(&mut self) {
        let mut state = self.slots.state();
        state.running = state.running.saturating_sub(1);
    }
}

impl Lease for LocalLease {
    fn fencing_token(&self) -> u64 {
        self.token
    }

    fn release(self: Box<Self>) -> BoxFuture<Result<(), GuardError>> {
        drop(self);
        Box::pin(async { Ok(()) })
    }
}
