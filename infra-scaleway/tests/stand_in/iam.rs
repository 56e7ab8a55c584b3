//! IAM applications and policies: what the conformance suite does not reach.
