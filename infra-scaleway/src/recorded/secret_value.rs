//! Reading a secret's value held against Scaleway's recorded answers.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::{Access, decode};
use crate::recorded::{evidence, exchanges};

#[test]
fn a_recorded_access_answer_decodes_to_its_payload() {
    let mut evidence = evidence("secret-values");
    for ex in exchanges("secret", "version-access") {
        let access: Access = ex.decode();
        // The fixtures keep no secret: the payload is replaced by a placeholder that is
        // not base64, which the reader refuses without quoting it.
        assert_eq!(access.data, ex.str("data"));
        assert!(ex.response["revision"].is_u64(), "{}", ex.source);
        let refused = decode("h", access.data.clone()).map(|_| ()).unwrap_err();
        assert!(!refused.message.contains(&access.data), "{refused}");
        let encoded = STANDARD.encode("a value");
        assert_eq!(decode("h", encoded).unwrap().expose(), "a value");
    }
    evidence.checked("secrets", "access");
    evidence.publish();
}
