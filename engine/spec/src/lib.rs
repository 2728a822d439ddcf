//! The Hearth deployment spec: YAML schema, interpolation, validation, model sources.
