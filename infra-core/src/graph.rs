//! Ordering resources by their references (Kahn's algorithm).

use std::collections::VecDeque;

/// A build order of `0..deps.len()`, where `deps[i]` lists what `i` depends on: every
/// node comes after all of its dependencies. Ties keep index order, so the result is
/// deterministic.
///
/// On a cycle, returns the nodes around one cycle, each depending on the next and the
/// last on the first.
pub(crate) fn topological_order(deps: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    let n = deps.len();
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependants: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (node, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependants[d].push(node);
        }
    }
    let mut ready: VecDeque<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(node) = ready.pop_front() {
        order.push(node);
        for &d in &dependants[node] {
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.push_back(d);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Every node left waits on another node left: walk dependencies until one repeats.
    let start = (0..n).find(|&i| waiting[i] > 0).expect("a node left over");
    let mut position = vec![usize::MAX; n];
    let mut walk = Vec::new();
    let mut current = start;
    loop {
        if position[current] != usize::MAX {
            return Err(walk.split_off(position[current]));
        }
        position[current] = walk.len();
        walk.push(current);
        current = *deps[current]
            .iter()
            .find(|&&d| waiting[d] > 0)
            .expect("a waiting node depends on a waiting node");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cycle_is_reported_in_dependency_order() {
        // 0 → 1 → 2 → 0, and 3 depends on 0.
        let deps = vec![vec![1], vec![2], vec![0], vec![0]];
        assert_eq!(topological_order(&deps), Err(vec![0, 1, 2]));
    }

    #[test]
    fn self_reference_is_a_cycle_of_one() {
        assert_eq!(topological_order(&[vec![], vec![1]]), Err(vec![1]));
    }

    fn dag() -> impl Strategy<Value = Vec<Vec<usize>>> {
        (1usize..40).prop_flat_map(|n| {
            // Node i may only depend on nodes below it: acyclic by construction.
            (0..n)
                .map(|i| proptest::collection::vec(0..i.max(1), 0..4.min(i + 1)))
                .collect::<Vec<_>>()
                .prop_map(|mut deps| {
                    for (i, d) in deps.iter_mut().enumerate() {
                        d.retain(|&x| x < i);
                        d.dedup();
                    }
                    deps
                })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn order_puts_dependencies_first(deps in dag()) {
            let order = topological_order(&deps).expect("acyclic");
            prop_assert_eq!(order.len(), deps.len());
            let mut at = vec![0; deps.len()];
            for (pos, &node) in order.iter().enumerate() {
                at[node] = pos;
            }
            for (node, ds) in deps.iter().enumerate() {
                for &d in ds {
                    prop_assert!(at[d] < at[node], "{d} must come before {node}");
                }
            }
        }

        #[test]
        fn a_back_edge_is_found_and_named(deps in dag(), pick in any::<prop::sample::Index>()) {
            // Add an edge from the lowest node of some existing edge back up to its dependant.
            let edges: Vec<(usize, usize)> = deps.iter().enumerate()
                .flat_map(|(i, ds)| ds.iter().map(move |&d| (i, d))).collect();
            prop_assume!(!edges.is_empty());
            let (from, to) = edges[pick.index(edges.len())];
            let mut cyclic = deps.clone();
            cyclic[to].push(from);
            let cycle = topological_order(&cyclic).expect_err("a cycle");
            prop_assert!(!cycle.is_empty());
            for (k, &node) in cycle.iter().enumerate() {
                let next = cycle[(k + 1) % cycle.len()];
                prop_assert!(cyclic[node].contains(&next), "{node} must depend on {next}");
            }
        }
    }
}
