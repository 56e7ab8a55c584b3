//! A layer that alters one kind of the backend underneath: the way a provider that
//! lacks it, governs it, or cannot read its tags behaves.

use std::sync::Arc;

use async_trait::async_trait;
use infra_core::sdk::layer::{Answer, Call, Layer, Layered, Next};
use infra_core::sdk::{Backend, BackendError, Capabilities};
use infra_core::sdk::{Deferral, Written};

/// What is different about the altered kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alteration {
    /// The backend does not realise it.
    Lacks,
    /// The backend realises it, but only records changes to it for approval.
    Governs,
    /// The backend realises it, but cannot read its tags (as Scaleway cannot for
    /// queues): whose a resource is cannot be told.
    TagsUnreadable,
    /// The backend does not implement `mark` at all (whatever the altered kind): every
    /// mark is refused as the trait's default refuses it.
    CannotMark,
}

/// `kind` altered as `how` says.
pub struct Altered {
    pub kind: &'static str,
    pub how: Alteration,
}

impl Altered {
    /// `inner`, with `kind` altered as `how` says.
    pub fn new(
        inner: Arc<dyn Backend>,
        kind: &'static str,
        how: Alteration,
    ) -> Arc<Layered<Altered>> {
        Layered::wrap(inner, Altered { kind, how })
    }
}

#[async_trait]
impl Layer for Altered {
    fn capabilities(&self, mut caps: Capabilities) -> Capabilities {
        match self.how {
            Alteration::Lacks => {
                caps.kinds.remove(self.kind);
                caps.ownership.remove(self.kind);
            }
            Alteration::TagsUnreadable => {
                caps.ownership.remove(self.kind);
            }
            Alteration::Governs | Alteration::CannotMark => {}
        }
        caps
    }

    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let ours = call.kind() == Some(self.kind);
        match (self.how, call) {
            (Alteration::Governs, Call::Create { kind, .. } | Call::Update { kind, .. })
                if ours =>
            {
                Ok(Answer::Written(Written::Deferred(
                    Deferral::awaiting_approval(format!(
                        "plan recorded for {kind}; it awaits approval"
                    )),
                )))
            }
            (Alteration::CannotMark, Call::Mark { kind, .. }) => {
                Err(BackendError::invalid(format!(
                    "the {} provider cannot put an ownership marker on an existing {kind}",
                    next.backend().provider()
                )))
            }
            (Alteration::TagsUnreadable, Call::Ownership { kind, .. }) if ours => Err(
                BackendError::invalid(format!("the tags of a {kind} cannot be read")),
            ),
            _ => next.run(call).await,
        }
    }
}
