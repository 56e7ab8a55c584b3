//! The bare-lists layer: observation as it is without complete lists.

use async_trait::async_trait;

use super::{Answer, Call, Layer, Next};
use crate::BackendError;
use crate::sdk::{Capabilities, Listed};

/// Hands each listed resource over by its name and handle alone, and says that no
/// kind lists complete: the engine then reads every resource one by one, as it does
/// for a backend whose lists carry nothing more. A baseline to measure complete lists
/// against, and a way to stop trusting a provider's lists without changing it.
#[derive(Clone, Copy, Debug, Default)]
pub struct BareLists;

#[async_trait]
impl Layer for BareLists {
    fn capabilities(&self, mut inner: Capabilities) -> Capabilities {
        inner.complete_lists.clear();
        inner
    }

    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        match next.run(call).await? {
            Answer::List(listed) => Ok(Answer::List(
                listed
                    .into_iter()
                    .map(|l| Listed::new(l.name, l.handle))
                    .collect(),
            )),
            other => Ok(other),
        }
    }
}
