//! Support code for cronguard integration tests.
