//! Secret Manager: what the conformance suite does not reach.
