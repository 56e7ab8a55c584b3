//! Serverless Functions: namespaces, functions, and compute: what the conformance suite does not reach.
