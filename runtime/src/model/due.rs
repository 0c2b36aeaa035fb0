//! The fires of one job that are due and wait to start.

use std::collections::VecDeque;

use crate::fire::Fire;

/// Due fires, oldest first. Almost always none or one, so the first is kept inline: a fire that
/// starts at once never touches a heap buffer.
#[derive(Debug, Default)]
pub(crate) struct Due {
    /// The oldest; `None` only when `rest` is empty too.
    head: Option<Fire>,
    rest: VecDeque<Fire>,
}

impl Due {
    pub(crate) fn push_back(&mut self, t: Fire) {
        if self.head.is_none() {
            self.head = Some(t);
        } else {
            self.rest.push_back(t);
        }
    }

    pub(crate) fn push_front(&mut self, t: Fire) {
        if let Some(old) = self.head.replace(t) {
            self.rest.push_front(old);
        }
    }

    pub(crate) fn pop_front(&mut self) -> Option<Fire> {
        let first = self.head.take()?;
        self.head = self.rest.pop_front();
        Some(first)
    }

    pub(crate) fn front(&self) -> Option<Fire> {
        self.head
    }

    pub(crate) fn back(&self) -> Option<Fire> {
        self.rest.back().copied().or(self.head)
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(self.head.is_some()) + self.rest.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = Fire> + '_ {
        self.head.into_iter().chain(self.rest.iter().copied())
    }

    /// Removes and returns every fire, oldest first.
    pub(crate) fn take_all(&mut self) -> Vec<Fire> {
        let mut all = Vec::with_capacity(self.len());
        all.extend(self.head.take());
        all.extend(self.rest.drain(..));
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
