//! The fires of one job that are due and wait to start.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};

/// Due fires, oldest first. Almost always none or one, so the first is kept inline: a fire that
/// starts at once never touches a heap buffer.
#[derive(Debug, Default)]
pub(super) struct Due {
    /// The oldest; `None` only when `rest` is empty too.
    head: Option<DateTime<Utc>>,
    rest: VecDeque<DateTime<Utc>>,
}

impl Due {
    pub(super) fn push_back(&mut self, t: DateTime<Utc>) {
        if self.head.is_none() {
            self.head = Some(t);
        } else {
            self.rest.push_back(t);
        }
    }

    pub(super) fn push_front(&mut self, t: DateTime<Utc>) {
        if let Some(old) = self.head.replace(t) {
            self.rest.push_front(old);
        }
    }

    pub(super) fn pop_front(&mut self) -> Option<DateTime<Utc>> {
        let first = self.head.take()?;
        self.head = self.rest.pop_front();
        Some(first)
    }

    pub(super) fn front(&self) -> Option<DateTime<Utc>> {
        self.head
    }

    pub(super) fn back(&self) -> Option<DateTime<Utc>> {
        self.rest.back().copied().or(self.head)
    }

    pub(super) fn len(&self) -> usize {
        usize::from(self.head.is_some()) + self.rest.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        self.head.into_iter().chain(self.rest.iter().copied())
    }

    /// Removes and returns every fire, oldest first.
    pub(super) fn take_all(&mut self) -> Vec<DateTime<Utc>> {
        let mut all = Vec::with_capacity(self.len());
        all.extend(self.head.take());
        all.extend(self.rest.drain(..));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_700_000_000 + s, 0).expect("in range")
    }

    #[test]
    fn behaves_as_a_deque() {
        let mut due = Due::default();
        let mut model = VecDeque::new();
        let ops: [(u8, i64); 12] = [
            (0, 1),
            (0, 2),
            (1, 0),
            (2, 9),
            (0, 3),
            (1, 0),
            (1, 0),
            (2, 7),
            (1, 0),
            (1, 0),
            (1, 0),
            (0, 4),
        ];
        for (op, s) in ops {
            match op {
                0 => {
                    due.push_back(t(s));
                    model.push_back(t(s));
                }
                1 => assert_eq!(due.pop_front(), model.pop_front()),
                _ => {
                    due.push_front(t(s));
                    model.push_front(t(s));
                }
            }
            assert_eq!(due.len(), model.len());
            assert_eq!(due.front(), model.front().copied());
            assert_eq!(due.back(), model.back().copied());
            assert!(due.iter().eq(model.iter().copied()));
        }
        assert_eq!(due.take_all(), Vec::from(model));
        assert_eq!(due.len(), 0);
    }
}
