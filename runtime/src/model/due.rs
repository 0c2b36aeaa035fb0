//! The fires of one job that are due and wait to start.

use std::collections::VecDeque;

use crate::fire::Fire;

/// Due fires, oldest first. Almost always none, for a moment one: the first is held inline and
/// the rest behind a pointer, so that one due fire costs no allocation of its own (the job's
/// `Flight` holding them is the one).
#[derive(Debug, Default)]
pub(crate) struct Due {
    /// The oldest; `None` only when `rest` is empty too.
    head: Option<Fire>,
    #[allow(clippy::box_collection)] // 8 bytes in every job instead of 32: few ever use it
    rest: Option<Box<VecDeque<Fire>>>,
}

impl Due {
    pub(crate) const EMPTY: Due = Due {
        head: None,
        rest: None,
    };

    fn rest_mut(&mut self) -> &mut VecDeque<Fire> {
        self.rest.get_or_insert_with(Box::default)
    }

    pub(crate) fn push_back(&mut self, t: Fire) {
        if self.head.is_none() {
            self.head = Some(t);
        } else {
            self.rest_mut().push_back(t);
        }
    }

    pub(crate) fn push_front(&mut self, t: Fire) {
        if let Some(old) = self.head.replace(t) {
            self.rest_mut().push_front(old);
        }
    }

    pub(crate) fn pop_front(&mut self) -> Option<Fire> {
        let first = self.head.take()?;
        self.head = self.rest.as_mut().and_then(|r| r.pop_front());
        if self.rest.as_ref().is_some_and(|r| r.is_empty()) {
            self.rest = None;
        }
        Some(first)
    }

    pub(crate) fn front(&self) -> Option<Fire> {
        self.head
    }

    pub(crate) fn back(&self) -> Option<Fire> {
        self.rest
            .as_ref()
            .and_then(|r| r.back().copied())
            .or(self.front())
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(self.head.is_some()) + self.rest.as_ref().map_or(0, |r| r.len())
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = Fire> + '_ {
        let rest = self.rest.iter().flat_map(|r| r.iter().copied());
        self.front().into_iter().chain(rest)
    }

    /// Removes and returns every fire, oldest first.
    pub(crate) fn take_all(&mut self) -> Vec<Fire> {
        let mut all = Vec::with_capacity(self.len());
        all.extend(self.head.take());
        if let Some(rest) = self.rest.take() {
            all.extend(*rest);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Fire {
        let t = chrono::DateTime::<chrono::Utc>::from_timestamp(1_700_000_000 + s, 0);
        Fire::new(t.expect("in range"), std::time::Duration::from_secs(60))
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
