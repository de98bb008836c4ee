//! Integration tests: common.
