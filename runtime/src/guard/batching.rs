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
    /// The job an operation is of: an operation queued before an urgent one of the same job
    /// stays before it (a release before the claim of the job's next fire, which would otherwise
    /// find the job busy with this process's own run).
    job_of: fn(&T) -> &str,
}

impl<T> Queue<T> {
    pub(crate) fn new(is_urgent: fn(&T) -> bool, job_of: fn(&T) -> &str) -> Self {
        Queue {
            urgent: VecDeque::new(),
            later: VecDeque::new(),
            is_urgent,
            job_of,
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
        let mut urgent = Vec::with_capacity(take);
        while urgent.len() < take {
            match self.urgent.pop_front() {
                Some(op) => urgent.push(op),
                None => break,
            }
        }
        // The operations queued earlier for the jobs of these urgent ones go first.
        let mut batch = Vec::with_capacity(take);
        if !urgent.is_empty() && !self.later.is_empty() {
            let jobs: std::collections::HashSet<&str> =
                urgent.iter().map(|op| (self.job_of)(op)).collect();
            let (first, rest): (VecDeque<T>, VecDeque<T>) = std::mem::take(&mut self.later)
                .into_iter()
                .partition(|op| jobs.contains((self.job_of)(op)));
            self.later = rest;
            batch.extend(first);
        }
        batch.extend(urgent);
        while batch.len() < take {
            match self.later.pop_front() {
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
        // Urgent and later operations of different jobs.
        let mut queue = Queue::new(
            |op: &(bool, u32)| op.0,
            |op: &(bool, u32)| if op.0 { "urgent" } else { "later" },
        );
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

    #[tokio::test]
    async fn an_operation_queued_before_an_urgent_one_of_the_same_job_stays_before_it() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        // (urgent, job, id): the release of job a is queued before its next claim.
        let mut queue = Queue::new(
            |op: &(bool, &'static str, u32)| op.0,
            |op: &(bool, &'static str, u32)| op.1,
        );
        for op in [
            (false, "b", 0),
            (false, "a", 1),
            (true, "a", 2),
            (true, "c", 3),
        ] {
            tx.send(op).expect("open");
        }
        assert!(queue.wait(&mut rx).await);
        let ids: Vec<u32> = queue
            .take(&mut rx, 10)
            .await
            .into_iter()
            .map(|op| op.2)
            .collect();
        assert_eq!(
            ids,
            [1, 2, 3, 0],
            "a's release before a's claim; b's after the claims"
        );
    }
}
