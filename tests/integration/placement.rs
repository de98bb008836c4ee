//! Integration tests: placement.
