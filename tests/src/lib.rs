//! Test harness for end-to-end tests (filled by the server issue).
