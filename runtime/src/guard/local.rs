//! `lock = "local"`: a semaphore of `max_instances` and the last claimed fire, in memory.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Claim, Guard, GuardError, Lease};
use crate::registry::BoxFuture;

pub(crate) struct LocalGuard {
    slots: Arc<Semaphore>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    last_claimed: Option<DateTime<Utc>>,
    last_token: u64,
}

impl LocalGuard {
    pub(crate) fn new(max_instances: u32) -> Self {
        LocalGuard {
            slots: Arc::new(Semaphore::new(max_instances as usize)),
            state: Mutex::new(State::default()),
        }
    }

    fn claim_sync(&self, fire_time: DateTime<Utc>) -> Claim {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.last_claimed.is_some_and(|last| last >= fire_time) {
            return Claim::AlreadyRan;
        }
        let Ok(permit) = self.slots.clone().try_acquire_owned() else {
            return Claim::Busy { first_report: true };
        };
        state.last_claimed = Some(fire_time);
        state.last_token += 1;
        Claim::Acquired(Box::new(LocalLease {
            _permit: permit,
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
        let last = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_claimed;
        Box::pin(async move { Ok(last) })
    }
}

struct LocalLease {
    _permit: OwnedSemaphorePermit,
    token: u64,
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
