//! The caller's scope: which resources `--target` and `--exclude` keep in a run.

use std::collections::HashSet;

use super::model::Slot;
use super::{Engine, Options};
use crate::{Plan, Subject};

impl Engine {
    /// Which slots the caller's `--target`/`--exclude` keep.
    pub(super) fn filter(&self, plan: &Plan, slots: &[Slot], options: &Options) -> Vec<bool> {
        if options.targets.is_empty() && options.excludes.is_empty() {
            return vec![true; slots.len()];
        }
        // Patterns are looked up, not scanned: a long target list (a script naming
        // thousands of resources) costs one lookup per resource, not one per pair.
        let lookup =
            |patterns: &[String]| -> HashSet<String> { patterns.iter().cloned().collect() };
        let (targets, excludes) = (lookup(&options.targets), lookup(&options.excludes));
        let named = |s: &Subject, patterns: &HashSet<String>| {
            !patterns.is_empty()
                && (patterns.contains(&s.name)
                    || patterns.contains(&format!("{}/{}/{}", s.provider, s.kind, s.name)))
        };
        let deps = plan.deps();
        let n = plan.len();
        let mut dependants = vec![Vec::new(); n];
        for (i, ds) in deps.iter().enumerate() {
            for &d in ds {
                dependants[d].push(i);
            }
        }
        let closure = |start: Vec<usize>, edges: &[Vec<usize>]| {
            let mut seen = vec![false; n];
            let mut stack = start;
            while let Some(i) = stack.pop() {
                if !std::mem::replace(&mut seen[i], true) {
                    stack.extend(edges[i].iter().copied());
                }
            }
            seen
        };
        let declared_matching = |patterns: &HashSet<String>| -> Vec<usize> {
            slots
                .iter()
                .filter_map(|s| s.index.filter(|_| named(&s.subject, patterns)))
                .collect()
        };
        let targeted = (!targets.is_empty()).then(|| closure(declared_matching(&targets), deps));
        let excluded = closure(declared_matching(&excludes), &dependants);
        slots
            .iter()
            .map(|s| match s.index {
                Some(i) => targeted.as_ref().is_none_or(|t| t[i]) && !excluded[i],
                None => {
                    (targets.is_empty() || named(&s.subject, &targets))
                        && !named(&s.subject, &excludes)
                }
            })
            .collect()
    }
}
