//! Testkit: tiny-model writers and fixture fetchers shared by the end-to-end tests.
