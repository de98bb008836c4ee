//! Integration tests: cluster.
