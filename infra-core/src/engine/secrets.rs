//! Composed secrets: a secret whose value is composed from other values of the fleet
//! (a connection string from a generated password and a database's endpoint) is written
//! again when what it is composed from changes.
//!
//! Nothing about the value is ever stored, not even a digest: the value is composed
//! afresh (reading the input secrets through `secret_value`, the only inbound plaintext
//! path) and compared, in memory, with the value the cloud holds, read the same way.
//! A plan does this for every composed secret that exists and whose inputs exist (so a
//! plan reads secret values, and its credentials need that permission); an apply does
//! it again right before deciding to write, once what the secret reads has been
//! applied. A plan shows a difference as `valueFrom: (sensitive)`.

use super::Engine;
use super::calls::reads_of;
use super::model::{Owner, Seen, Slot, Target, Unobserved, World};
use crate::fleet::DynSpec;
use crate::{BackendError, Plan};

impl Engine {
    /// For each declared composed secret that exists, is this fleet's and whose inputs
    /// exist, whether the value the cloud holds differs from the one composed now. A
    /// value that cannot be read leaves the secret not observed, with the error.
    pub(super) async fn compare_composed_secrets(&self, plan: &Plan, slots: &mut [Slot]) {
        let world = World::of_slots(plan, slots);
        for slot in slots.iter_mut() {
            let Target::Present(spec) = &slot.target else {
                continue;
            };
            let Seen::Present {
                sighting,
                owner: Owner::Ours | Owner::Unreadable { in_ledger: true },
            } = &slot.seen
            else {
                continue;
            };
            if !spec.0.composes_secret() {
                continue;
            }
            let inputs_exist = spec
                .0
                .deps()
                .iter()
                .all(|d| world.handles.contains_key(&d.key()));
            if !inputs_exist {
                // Written when its inputs are created, and compared then.
                continue;
            }
            let handle = sighting.handle.clone();
            match self
                .composed_differs(plan, slot, spec, &world, &handle)
                .await
            {
                Ok(differs) => slot.secret_differs = Some(differs),
                Err(mut e) => {
                    e.message = format!(
                        "the secret's value could not be compared with the one composed from \
                         its inputs: {}",
                        e.message
                    );
                    slot.seen = Seen::Unobserved(Unobserved::Error(Box::new(e)));
                }
            }
        }
    }

    async fn composed_differs(
        &self,
        plan: &Plan,
        slot: &Slot,
        spec: &DynSpec,
        world: &World,
        handle: &str,
    ) -> Result<bool, BackendError> {
        let (env, secrets) = reads_of(plan, spec, world);
        let settled = self.settle_with_secrets(spec, &env, &secrets).await?;
        let Some(composed) = spec.0.composed_secret(&*settled) else {
            return Ok(false);
        };
        let backend = self.backends.get(slot.provider).ok_or_else(|| {
            BackendError::invalid(format!(
                "no {} backend to read a secret from",
                slot.provider
            ))
        })?;
        let stored = backend.secret_value(&slot.subject.region, handle).await?;
        Ok(stored.expose() != composed.expose())
    }
}
