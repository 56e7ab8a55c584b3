//! Queues against moto: what the conformance suite does not reach.
