//! A small seeded generator (SplitMix64): every id, address and random fault of the
//! simulator comes from one, so that a seed fixes them all.

use serde::{Deserialize, Serialize};

/// A SplitMix64 generator. Its whole state is one number, which the world file keeps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// A generator that depends only on the seed and the labels, not on how many
    /// numbers were drawn before: for values that must be stable per region (a default
    /// VPC, the newest image).
    pub(crate) fn derived(seed: u64, labels: &[&str]) -> Self {
        // FNV-1a over the labels, separated so that ("ab", "c") differs from ("a", "bc").
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for label in labels {
            for byte in label.bytes().chain(std::iter::once(0xff)) {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        let mut rng = Rng::new(seed ^ hash);
        rng.next_u64();
        rng
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A number in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chars(&mut self, n: usize, alphabet: &[u8]) -> String {
        (0..n)
            .map(|_| char::from(alphabet[self.below(alphabet.len() as u64) as usize]))
            .collect()
    }

    /// `n` lowercase hexadecimal digits.
    pub(crate) fn hex(&mut self, n: usize) -> String {
        self.chars(n, b"0123456789abcdef")
    }

    /// `n` lowercase letters and digits.
    pub(crate) fn alnum(&mut self, n: usize) -> String {
        self.chars(n, b"abcdefghijklmnopqrstuvwxyz0123456789")
    }

    /// `n` letters (both cases) and digits.
    pub(crate) fn mixed(&mut self, n: usize) -> String {
        self.chars(
            n,
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        )
    }

    /// A version-4 UUID.
    pub(crate) fn uuid(&mut self) -> String {
        let a = self.hex(8);
        let b = self.hex(4);
        let c = self.hex(3);
        let variant = ['8', '9', 'a', 'b'][self.below(4) as usize];
        let d = self.hex(3);
        let e = self.hex(12);
        format!("{a}-{b}-4{c}-{variant}{d}-{e}")
    }

    /// An octet in `lo..=hi`.
    pub(crate) fn octet(&mut self, lo: u8, hi: u8) -> u8 {
        let span = u64::from(hi.saturating_sub(lo)) + 1;
        lo + u8::try_from(self.below(span)).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        assert_eq!(a.hex(17), b.hex(17));
        assert_eq!(a.uuid(), b.uuid());
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }

    #[test]
    fn derived_depends_on_labels_only() {
        let mut a = Rng::derived(3, &["aws", "eu-west-3", "vpc"]);
        let mut b = Rng::derived(3, &["aws", "eu-west-3", "vpc"]);
        let mut c = Rng::derived(3, &["aws", "eu-west-1", "vpc"]);
        let (x, y, z) = (a.hex(17), b.hex(17), c.hex(17));
        assert_eq!(x, y);
        assert_ne!(x, z);
    }

    #[test]
    fn uuid_has_the_right_shape() {
        let u = Rng::new(9).uuid();
        let parts: Vec<_> = u.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12]);
        assert_eq!(&u[14..15], "4");
    }
}
