//! The contract's acts (§2–§7), each one database transaction that takes the locks
//! the contract names, compares what it must compare and appends what happened to the
//! machine's timeline. They are methods of [`SqlStore`](super::engine::SqlStore),
//! written once for both databases, grouped by what they act on:
//!
//! | module | acts | contract |
//! |---|---|---|
//! | `plans` | create a plan, cancel it, preflight | §2, §3.1 |
//! | `adoption` | create an adopt plan, the adoption record and its recorded refusal | §6.3 |
//! | `approvals` | approve a plan, revoke the approval | §2, §3.2 comparison 1, §6.4 |
//! | `blankets` | grant and revoke a blanket approval, approve under one, list them | §2 |
//! | `commitment` | the commitment transaction and its recorded refusal | §3.2, choice §10.30 |
//! | `attempt` | the attempt transaction and its recorded refusal | §3.3, §4, choice §10.30 |
//! | `takeover` | an operation taken over, at a controller's or recovery-admin's request | §3.4 |
//! | `outcome` | the node's response, classification, accounting decisions | §4, §5, §5.1, §5.2 |
//! | `observations` | observations, use-time dependency checks, drift rules | §3.1, §4.1, §6.1, §6.5 |
//! | `machines` | add a machine, change its assignment, freeze and unfreeze | §6.2, §7.4, §8 invariant 9 |
//! | `recovery` | enter and leave recovery mode, account, mark and release scopes | §7 |
//! | `identities` | register and revoke principals | §2 |
//! | `certificates` | bind a client certificate to its principal, list the bindings | §2, §7.3 |
//! | `publishing` | publish releases, read a plan's sealed artifact | §4.1, §8 invariant 7 |
//!
//! What every act shares is outside this module: the transaction runner and the
//! timeline writer (`super::transaction`), the reads and locks (`super::lookups`), the
//! row decoders (`super::rows`) and the comparisons that need no database
//! (`super::common`).

mod adoption;
mod approvals;
mod attempt;
mod blankets;
mod certificates;
mod commitment;
mod identities;
mod machines;
mod observations;
mod outcome;
mod plans;
mod publishing;
mod recovery;
mod takeover;
