//! What the batching guards share: taking what is queued into one batch without waiting to fill
//! it, urgent operations first.

use std::collections::VecDeque;

use tokio::sync::mpsc;

/// Operations waiting for a batch. The urgent ones — claims, whose fires wait for their answer to
/// start, and renewals, which keep running jobs' leases — go before the rest (releases, abandons,
/// reports), which fill the room a batch has left. So a burst of claims is not held up by the
/// releases of the runs it already started; those wait only while a whole batch of urgent
/// operations is queued before them.
pub(crate) struct Queue<T> {
    urgent: VecDeque<T>,
    later: VecDeque<T>,
    is_urgent: fn(&T) -> bool,
}

impl<T> Queue<T> {
    pub(crate) fn new(is_urgent: fn(&T) -> bool) -> Self {
        Queue {
            urgent: VecDeque::new(),
            later: VecDeque::new(),
            is_urgent,
        }
    }

    fn len(&self) -> usize {
        self.urgent.len() + self.later.len()
    }

    fn push(&mut self, op: T) {
        if (self.is_urgent)(&op) {
            self.urgent.push_back(op);
        } else {
            self.later.push_back(op);
        }
    }

    /// Waits until an operation is queued; `false` once the senders are gone and nothing is left.
    pub(crate) async fn wait(&mut self, rx: &mut mpsc::UnboundedReceiver<T>) -> bool {
        if self.len() > 0 {
            return true;
        }
        match rx.recv().await {
            Some(op) => {
                self.push(op);
                true
            }
            None => false,
        }
    }

    /// The next batch: what is queued, up to `max`, urgent operations first. When others are
    /// queued — a burst of jobs due together, each claiming on a task of its own — it yields once
    /// to let the rest of the burst queue up; a lone operation goes at once.
    pub(crate) async fn take(&mut self, rx: &mut mpsc::UnboundedReceiver<T>, max: usize) -> Vec<T> {
        self.drain(rx, max);
        if self.len() > 1 && self.urgent.len() < max {
            tokio::task::yield_now().await;
            self.drain(rx, max);
        }
        let take = self.len().min(max);
        let mut batch = Vec::with_capacity(take);
        while batch.len() < take {
            match self.urgent.pop_front().or_else(|| self.later.pop_front()) {
                Some(op) => batch.push(op),
                None => break,
            }
        }
        batch
    }

    /// Receives what is queued, until a batch of urgent operations is full.
    fn drain(&mut self, rx: &mut mpsc::UnboundedReceiver<T>, max: usize) {
        while self.urgent.len() < max {
            match rx.try_recv() {
                Ok(op) => self.push(op),
                Err(_) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn urgent_operations_go_first_and_the_rest_fill_the_room_left() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut queue = Queue::new(|op: &(bool, u32)| op.0);
        for (i, urgent) in [false, true, false, true, true].into_iter().enumerate() {
            tx.send((urgent, i as u32)).expect("open");
        }
        assert!(queue.wait(&mut rx).await);
        let ids = |batch: Vec<(bool, u32)>| batch.into_iter().map(|op| op.1).collect::<Vec<_>>();
        assert_eq!(ids(queue.take(&mut rx, 2).await), [1, 3]);
        assert_eq!(ids(queue.take(&mut rx, 2).await), [4, 0]);
        assert_eq!(ids(queue.take(&mut rx, 2).await), [2]);
        drop(tx);
        assert!(!queue.wait(&mut rx).await, "closed and empty");
    }
}
