//! Serverless Containers: namespaces and containers: what the conformance suite does not reach.
