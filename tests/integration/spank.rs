//! Integration tests: spank.
