//! Managed Database for PostgreSQL: what the conformance suite does not reach.
