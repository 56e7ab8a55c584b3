//! Secret values a provider makes or handles itself: a generated value, drawn locally
//! for clouds that have no generator, and errors scrubbed of a value a service quoted.

use crate::error::{BackendError, ErrorKind};
use crate::secret::SecretString;

/// What a generated value is drawn from: the 66 characters `A`–`Z`, `a`–`z`, `0`–`9`,
/// `-`, `_`, `.` and `~`, which need no quoting in a URL, a connection string or a shell.
pub const GENERATED_ALPHABET: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~";

/// A value of `length` characters of [`GENERATED_ALPHABET`], each equally likely
/// (rejection sampling over the operating system's random source, `getrandom`).
///
/// # Errors
/// When the operating system gives no randomness.
pub fn generate_secret(length: u16) -> Result<SecretString, BackendError> {
    let length = usize::from(length);
    // The largest multiple of the alphabet's size a byte can hold: bytes at or above it
    // are dropped, so that every character is equally likely.
    let limit = 256 - 256 % GENERATED_ALPHABET.len();
    let mut out = String::with_capacity(length);
    let mut buf = [0u8; 64];
    while out.len() < length {
        getrandom::fill(&mut buf).map_err(|e| {
            BackendError::new(
                ErrorKind::Other,
                format!("no randomness could be had to generate the secret's value: {e}"),
            )
        })?;
        for &b in &buf {
            if out.len() == length {
                break;
            }
            if usize::from(b) < limit {
                out.push(char::from(
                    GENERATED_ALPHABET[usize::from(b) % GENERATED_ALPHABET.len()],
                ));
            }
        }
    }
    buf.fill(0);
    Ok(SecretString::new(out))
}

/// `e` with `value` replaced by `<redacted>` in its message, should the service have
/// quoted what it was sent.
pub fn scrub_secret(mut e: BackendError, value: &SecretString) -> BackendError {
    let plain = value.expose();
    if !plain.is_empty() && e.message.contains(plain) {
        e.message = e.message.replace(plain, "<redacted>");
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_value_has_its_length_and_only_the_alphabet() {
        for length in [0u16, 8, 24, 4096] {
            let value = generate_secret(length).unwrap();
            assert_eq!(value.expose().len(), usize::from(length));
            assert!(
                value
                    .expose()
                    .bytes()
                    .all(|b| GENERATED_ALPHABET.contains(&b))
            );
        }
        assert_ne!(
            generate_secret(32).unwrap().expose(),
            generate_secret(32).unwrap().expose()
        );
        assert_eq!(GENERATED_ALPHABET.len(), 66);
    }

    #[test]
    fn a_scrubbed_error_never_quotes_the_value() {
        let value = SecretString::new("hunter2-hunter2");
        let e = scrub_secret(
            BackendError::invalid("bad payload hunter2-hunter2 refused"),
            &value,
        );
        assert!(!e.message.contains("hunter2-hunter2"));
        assert!(e.message.contains("<redacted>"));
    }
}
