//! Dispatch and observation against the Talos node simulator, over real gRPC with
//! mutual TLS.

mod apply;
mod support;
