//! What the batching guards share: taking what is queued into one batch without waiting to fill
//! it.

use tokio::sync::mpsc;

/// `first` and what is queued behind it, up to `max` in all. Yields once first, so that the
/// operations started in the same instant (each job's claim runs on a task of its own) join it.
pub(crate) async fn take_queued<T>(
    first: T,
    rx: &mut mpsc::UnboundedReceiver<T>,
    max: usize,
) -> Vec<T> {
    tokio::task::yield_now().await;
    let mut batch = vec![first];
    while batch.len() < max {
        match rx.try_recv() {
            Ok(queued) => batch.push(queued),
            Err(_) => break,
        }
    }
    batch
}
