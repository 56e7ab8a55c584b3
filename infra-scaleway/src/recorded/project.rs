//! The project check held against Scaleway's recorded answers.

use infra_core::sdk::ErrorKind;

use crate::clients::Project;
use crate::recorded::{evidence, exchanges};

#[test]
fn a_recorded_project_decodes_and_a_missing_one_is_not_absence() {
    let mut evidence = evidence("account");
    for ex in exchanges("account", "project-get") {
        if ex.ok() {
            let project: Project = ex.decode();
            assert_eq!(project.id, ex.str("id"));
            assert_eq!(project.organization_id, ex.str("organization_id"));
        } else {
            // The check's call lists no resource as absence: a project that is not
            // there is never "no project". `ProjectAccount` turns this `not_found` into
            // a denial (its own unit of behaviour, tested on the stand-in).
            let err = ex.error(&[]);
            assert_eq!(err.kind, ErrorKind::Invalid, "{}: {err}", ex.source);
            assert_eq!(err.code.as_deref(), Some("not_found"));
        }
    }
    evidence.checked("account", "read");
    evidence.publish();
}
