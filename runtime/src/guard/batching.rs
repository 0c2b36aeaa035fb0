//! What the batching guards share: taking what is queued into one batch without waiting to fill
//! it.

use tokio::sync::mpsc;

/// `first` and what is queued behind it, up to `max` in all. When others are queued — a burst of
/// jobs due together, each claiming on a task of its own — it yields once to let the rest of the
/// burst queue up; a lone operation goes at once.
pub(crate) async fn take_queued<T>(
    first: T,
    rx: &mut mpsc::UnboundedReceiver<T>,
    max: usize,
) -> Vec<T> {
    let mut batch = vec![first];
    drain(rx, &mut batch, max);
    if batch.len() > 1 && batch.len() < max {
        tokio::task::yield_now().await;
        drain(rx, &mut batch, max);
    }
    batch
}

fn drain<T>(rx: &mut mpsc::UnboundedReceiver<T>, batch: &mut Vec<T>, max: usize) {
    while batch.len() < max {
        match rx.try_recv() {
            Ok(queued) => batch.push(queued),
            Err(_) => break,
        }
    }
}
