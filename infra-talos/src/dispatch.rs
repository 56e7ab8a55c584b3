//! The dispatch client: the only code that sends `ApplyConfiguration`, and only with
//! the proof of a committed attempt.
//!
//! The send is always in `NO_REBOOT` mode. Its answer is classified for the
//! execution contract:
//!
//! | the node's answer | class |
//! |---|---|
//! | an answer | [`ApplyResponse::Accepted`] |
//! | `InvalidArgument` (a validation error: nothing changed) | [`ApplyResponse::Rejected`] |
//! | `InvalidArgument` refusing a change that needs a reboot | [`ApplyResponse::Refused`] |
//! | any other status code the node sent | [`ApplyResponse::Refused`] |
//! | none: deadline passed, connection failed or broke, `Unavailable`, `Cancelled` | [`ApplyResponse::Unknown`] |
//!
//! An unknown outcome is never "failed" and never "not applied": the request may
//! have landed, and only a later observation can tell.
//!
//! The deadline is the attempt's transport deadline, kept by this client: when it
//! passes the client gives up and resets the stream. It is not sent to the node as a
//! gRPC timeout, so the node never cuts an apply short on its own.

use tonic::Code;

use crate::api::machine;
use crate::api::machine::apply_configuration_request::Mode;
use crate::api::methods;
use crate::attempt::{CommittedAttempt, ConfigArtifact};
use crate::connect::NodeChannel;
use crate::digest::Digest;
use crate::redact::redact;
use crate::rpc::{CallError, DISPATCH_METHODS, GuardedChannel, from_transport};

/// The start of Talos's refusal of a no-reboot apply whose change needs a reboot
/// (sent as `InvalidArgument`, but not a validation error).
const NEEDS_REBOOT: &str = "this config change can't be applied in immediate mode";

/// Whether the send applies the configuration or only asks the node to validate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// Apply in `NO_REBOOT` mode.
    Apply,
    /// Validate in `NO_REBOOT` mode and change nothing (`dry_run`).
    DryRun,
}

/// How a send ended without an answer from the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportOutcome {
    /// The attempt's transport deadline passed first.
    DeadlineExceeded,
    /// The connection failed or broke, or the call was cancelled, after the request
    /// may have left.
    ConnectionLost,
    /// gRPC `Unavailable` (a failed dial included): whether the request was sent is
    /// unknown.
    Unavailable,
}

/// The class of a send's outcome (see the module documentation). Text that came from
/// the node is redacted, failing closed: only words recognised as safe are kept, and
/// values, configuration lines and diffs are withheld.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyResponse {
    /// The node answered.
    Accepted {
        /// The node's warnings about the configuration (redacted).
        warnings: Vec<String>,
        /// The node's account of what it did (redacted).
        mode_details: String,
    },
    /// The node refused the configuration as invalid; nothing changed.
    Rejected {
        /// The validation message (redacted).
        message: String,
    },
    /// The node answered with another status code (a no-reboot refusal included).
    Refused {
        /// The code.
        code: Code,
        /// The message (redacted).
        message: String,
    },
    /// No answer: the outcome is unknown.
    Unknown {
        /// How the send ended.
        outcome: TransportOutcome,
    },
}

/// A send's result, with the attempt it was made under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatched {
    /// The operation.
    pub operation_id: String,
    /// The attempt's number.
    pub attempt: u32,
    /// The target machine.
    pub machine: String,
    /// The artifact's digest.
    pub artifact_digest: Digest,
    /// Apply or dry run.
    pub delivery: Delivery,
    /// The classified outcome.
    pub response: ApplyResponse,
}

/// Why a send did not happen (nothing was sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    /// The artifact is not the one the attempt was committed for.
    #[error(
        "the artifact (digest {actual}) is not the one attempt {attempt} of operation \
         {operation_id} was committed for (digest {expected}); nothing was sent"
    )]
    ArtifactMismatch {
        /// The operation.
        operation_id: String,
        /// The attempt.
        attempt: u32,
        /// The committed digest.
        expected: Digest,
        /// The artifact's digest.
        actual: Digest,
    },
}

/// Sends machine configuration to one node, under committed attempts. Cheap to
/// clone; clones share the channel.
#[derive(Clone)]
pub struct DispatchClient {
    channel: GuardedChannel,
}

impl std::fmt::Debug for DispatchClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DispatchClient").finish_non_exhaustive()
    }
}

impl DispatchClient {
    /// A client sending through `channel`.
    #[must_use]
    pub fn new(channel: &NodeChannel) -> Self {
        DispatchClient {
            channel: GuardedChannel::new(channel.channel.clone(), DISPATCH_METHODS),
        }
    }

    /// Sends `artifact` in `NO_REBOOT` mode under `attempt`, which it consumes, and
    /// waits for the answer no longer than the attempt's transport deadline.
    ///
    /// Refuses (sending nothing) when the artifact's digest is not the attempt's.
    pub async fn send(
        &self,
        attempt: CommittedAttempt,
        artifact: &ConfigArtifact,
        delivery: Delivery,
    ) -> Result<Dispatched, DispatchError> {
        if artifact.digest() != attempt.artifact_digest() {
            return Err(DispatchError::ArtifactMismatch {
                operation_id: attempt.operation_id().to_owned(),
                attempt: attempt.attempt(),
                expected: attempt.artifact_digest(),
                actual: artifact.digest(),
            });
        }
        let request = machine::ApplyConfigurationRequest {
            data: artifact.bytes().to_vec(),
            mode: Mode::NoReboot as i32,
            dry_run: delivery == Delivery::DryRun,
            try_mode_timeout: None,
        };
        let answer: Result<machine::ApplyConfigurationResponse, _> = self
            .channel
            .unary(
                methods::APPLY_CONFIGURATION,
                request,
                attempt.transport_deadline(),
            )
            .await;
        let response = match answer {
            Ok(answer) => accepted(answer),
            Err(error) => classify(error),
        };
        Ok(Dispatched {
            operation_id: attempt.operation_id().to_owned(),
            attempt: attempt.attempt(),
            machine: attempt.machine().to_owned(),
            artifact_digest: attempt.artifact_digest(),
            delivery,
            response,
        })
    }
}

/// An answer: accepted, unless a node reported its own error in it.
fn accepted(answer: machine::ApplyConfigurationResponse) -> ApplyResponse {
    if let Some(error) = answer
        .messages
        .iter()
        .filter_map(|message| message.metadata.as_ref())
        .map(|metadata| metadata.error.as_str())
        .find(|error| !error.is_empty())
    {
        return ApplyResponse::Refused {
            code: Code::Unknown,
            message: redact(error),
        };
    }
    let mut warnings = Vec::new();
    let mut details = Vec::new();
    for message in answer.messages {
        warnings.extend(message.warnings.iter().map(|warning| redact(warning)));
        if !message.mode_details.is_empty() {
            details.push(redact(&message.mode_details));
        }
    }
    ApplyResponse::Accepted {
        warnings,
        mode_details: details.join("; "),
    }
}

/// A send that ended without an answer, or with a status.
fn classify(error: CallError) -> ApplyResponse {
    let status = match error {
        CallError::Deadline => {
            return ApplyResponse::Unknown {
                outcome: TransportOutcome::DeadlineExceeded,
            };
        }
        CallError::Status(status) => status,
    };
    let unknown = |outcome| ApplyResponse::Unknown { outcome };
    match status.code() {
        Code::DeadlineExceeded => unknown(TransportOutcome::DeadlineExceeded),
        Code::Unavailable => unknown(TransportOutcome::Unavailable),
        Code::Cancelled => unknown(TransportOutcome::ConnectionLost),
        _ if from_transport(&status) => unknown(TransportOutcome::ConnectionLost),
        Code::InvalidArgument if !status.message().starts_with(NEEDS_REBOOT) => {
            ApplyResponse::Rejected {
                message: redact(status.message()),
            }
        }
        code => ApplyResponse::Refused {
            code,
            message: redact(status.message()),
        },
    }
}

#[cfg(test)]
mod tests {
    use tonic::Status;

    use super::*;
    use crate::api::common;

    #[test]
    fn statuses_classify() {
        let class = |status: Status| classify(CallError::Status(status));
        assert_eq!(
            class(Status::invalid_argument("1 error occurred: bad \"s3cret\"")),
            ApplyResponse::Rejected {
                message: "1 error occurred: bad \"<withheld>\"".into()
            }
        );
        assert_eq!(
            class(Status::invalid_argument(format!(
                "{NEEDS_REBOOT}\ndiff: + token: abc"
            ))),
            ApplyResponse::Refused {
                code: Code::InvalidArgument,
                message: "this config change can't be applied in immediate mode <diff withheld>"
                    .into()
            }
        );
        assert_eq!(
            class(Status::unavailable("down")),
            ApplyResponse::Unknown {
                outcome: TransportOutcome::Unavailable
            }
        );
        assert_eq!(
            class(Status::deadline_exceeded("late")),
            ApplyResponse::Unknown {
                outcome: TransportOutcome::DeadlineExceeded
            }
        );
        assert_eq!(
            class(Status::cancelled("gone")),
            ApplyResponse::Unknown {
                outcome: TransportOutcome::ConnectionLost
            }
        );
        assert_eq!(
            class(Status::from_error(Box::new(std::io::Error::other("reset")))),
            ApplyResponse::Unknown {
                outcome: TransportOutcome::ConnectionLost
            }
        );
        assert_eq!(
            class(Status::failed_precondition("busy")),
            ApplyResponse::Refused {
                code: Code::FailedPrecondition,
                message: "busy".into()
            }
        );
        assert_eq!(
            classify(CallError::Deadline),
            ApplyResponse::Unknown {
                outcome: TransportOutcome::DeadlineExceeded
            }
        );
    }

    #[test]
    fn a_node_error_in_the_answer_is_a_refusal() {
        let answer = machine::ApplyConfigurationResponse {
            messages: vec![machine::ApplyConfiguration {
                metadata: Some(common::Metadata {
                    hostname: "n".into(),
                    error: "failed".into(),
                }),
                ..Default::default()
            }],
        };
        assert_eq!(
            accepted(answer),
            ApplyResponse::Refused {
                code: Code::Unknown,
                message: "failed".into()
            }
        );
    }
}
