//! HTTP server (axum) for the engine. The routes arrive with the API issue; today the crate hosts the `hearth-engine` binary.
