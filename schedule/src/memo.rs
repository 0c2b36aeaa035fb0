//! A small per-thread memory of recent cron answers. A scheduler asks many schedules that share
//! one parsed expression (parsing is cached, see `parsed`) for the fire after one instant — every
//! job of a burst asks for the fire after that burst — and the walk costs far more than a lookup.
//! The answer is a pure function of (expression, zone, instant), and each entry holds its
//! expression alive, so an address can never be reused by another expression while remembered.

use std::cell::RefCell;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::CronExpr;

/// Entries per thread (direct-mapped by the expression's address and the instant).
const SLOTS: usize = 64;

struct Entry {
    expr: Arc<CronExpr>,
    tz: Tz,
    after: DateTime<Utc>,
    next: Option<DateTime<Utc>>,
}

thread_local! {
    static MEMO: RefCell<Vec<Option<Entry>>> = RefCell::new((0..SLOTS).map(|_| None).collect());
}

fn slot(expr: &Arc<CronExpr>, after: DateTime<Utc>) -> usize {
    let address = Arc::as_ptr(expr) as usize;
    let instant = after.timestamp_micros() as u64;
    let mixed = (address as u64 >> 4) ^ instant.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed % SLOTS as u64) as usize
}

/// The answer for (`expr`, `tz`, `after`): remembered, or computed by `walk` and remembered.
pub(crate) fn next_after(
    expr: &Arc<CronExpr>,
    tz: Tz,
    after: DateTime<Utc>,
    walk: impl FnOnce() -> Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    let i = slot(expr, after);
    let hit = MEMO.with(|memo| {
        memo.borrow()[i].as_ref().and_then(|e| {
            (Arc::ptr_eq(&e.expr, expr) && e.tz == tz && e.after == after).then_some(e.next)
        })
    });
    if let Some(next) = hit {
        return next;
    }
    let next = walk();
    MEMO.with(|memo| {
        memo.borrow_mut()[i] = Some(Entry {
            expr: Arc::clone(expr),
            tz,
            after,
            next,
        });
    });
    next
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use crate::Schedule;

    /// Answers through the memory equal a fresh walk (each asked once on a thread of its own,
    /// whose memory is empty), for one expression in two zones, for more instants than the
    /// memory holds, asked twice.
    #[test]
    fn remembered_answers_are_the_walks_answers() {
        let berlin = Schedule::cron("0 30 2 * * *", "Europe/Berlin").expect("valid");
        let tokyo = Schedule::cron("0 30 2 * * *", "Asia/Tokyo").expect("valid");
        let start = chrono::DateTime::parse_from_rfc3339("2026-03-28T00:00:00Z")
            .expect("valid")
            .to_utc();
        let instants: Vec<_> = (0..200)
            .map(|h| start + TimeDelta::minutes(37 * h))
            .collect();
        let fresh = {
            let (berlin, tokyo, instants) = (berlin.clone(), tokyo.clone(), instants.clone());
            std::thread::spawn(move || {
                instants
                    .iter()
                    .map(|t| (berlin.next_after(*t), tokyo.next_after(*t)))
                    .collect::<Vec<_>>()
            })
            .join()
            .expect("walks")
        };
        for round in 0..2 {
            for (t, expected) in instants.iter().zip(&fresh) {
                let got = (berlin.next_after(*t), tokyo.next_after(*t));
                assert_eq!(&got, expected, "round {round}, {t}");
            }
        }
        assert_ne!(berlin.next_after(start), tokyo.next_after(start));
    }
}
