//! The `hearth-monitor` sidecar. Not built yet: see issue 7.
