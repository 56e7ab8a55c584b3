//! Container Registry namespaces: what the conformance suite does not reach.
