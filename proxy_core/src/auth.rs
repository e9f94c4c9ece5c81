//! Tenant API keys: format, checksum, keyed hash and lookup.
//!
//! A key is `sk-sg-` + 32 random base62 characters + 6 base62 characters of CRC32 over the random
//! part (GitHub's token scheme). A malformed key or a bad checksum is refused before any lookup;
//! leaked keys can be found by scanners from the prefix alone. Only `HMAC-SHA256(pepper, key)` is
//! stored; the lookup compares the full digest in constant time after the map hit.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

pub const KEY_PREFIX: &str = "sk-sg-";
const BODY_LEN: usize = 32;
const CHECK_LEN: usize = 6;
pub const KEY_LEN: usize = KEY_PREFIX.len() + BODY_LEN + CHECK_LEN;
/// How many characters of a key are public (shown in listings and logs).
pub const PUBLIC_PREFIX_LEN: usize = KEY_PREFIX.len() + 6;

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

pub type KeyHash = [u8; 32];

fn base62_fixed(mut value: u64, width: usize) -> String {
    let mut out = vec![b'0'; width];
    for slot in out.iter_mut().rev() {
        *slot = BASE62[(value % 62) as usize];
        value /= 62;
    }
    String::from_utf8(out).unwrap_or_default()
}

fn checksum(body: &str) -> String {
    base62_fixed(u64::from(crc32fast::hash(body.as_bytes())), CHECK_LEN)
}

/// A fresh key from the operating system's CSPRNG.
pub fn generate() -> Result<String, getrandom::Error> {
    // Rejection sampling keeps every base62 character equally likely.
    let mut body = String::with_capacity(BODY_LEN);
    let mut buf = [0u8; 64];
    while body.len() < BODY_LEN {
        getrandom::fill(&mut buf)?;
        for byte in buf {
            if body.len() == BODY_LEN {
                break;
            }
            if usize::from(byte) < 62 * 4 {
                body.push(char::from(BASE62[usize::from(byte) % 62]));
            }
        }
    }
    let check = checksum(&body);
    Ok(format!("{KEY_PREFIX}{body}{check}"))
}

/// Shape and checksum only; says nothing about whether the key exists.
pub fn well_formed(key: &str) -> bool {
    if key.len() != KEY_LEN || !key.starts_with(KEY_PREFIX) {
        return false;
    }
    let rest = &key[KEY_PREFIX.len()..];
    if !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return false;
    }
    let (body, check) = rest.split_at(BODY_LEN);
    checksum(body).as_bytes().ct_eq(check.as_bytes()).into()
}

/// The public part of a key, safe for listings and logs.
pub fn public_prefix(key: &str) -> &str {
    key.get(..PUBLIC_PREFIX_LEN).unwrap_or(KEY_PREFIX)
}

/// HMAC-SHA256 keyed with the server's pepper; cloned per request (no re-keying on the hot path).
#[derive(Clone)]
pub struct KeyHasher {
    mac: Hmac<Sha256>,
}

impl KeyHasher {
    /// `None` only if the MAC refuses the key length, which HMAC never does.
    pub fn new(pepper: &[u8]) -> Option<Self> {
        let mac = <Hmac<Sha256> as Mac>::new_from_slice(pepper).ok()?;
        Some(Self { mac })
    }

    pub fn hash(&self, key: &str) -> KeyHash {
        let mut mac = self.mac.clone();
        mac.update(key.as_bytes());
        mac.finalize().into_bytes().into()
    }
}

/// Constant-time equality of two digests (the map lookup found a candidate; confirm it).
pub fn digest_eq(a: &KeyHash, b: &KeyHash) -> bool {
    a.ct_eq(b).into()
}

pub fn parse_hex_digest(hex: &str) -> Option<KeyHash> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

pub fn hex_digest(digest: &KeyHash) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_well_formed_and_distinct() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), KEY_LEN);
        assert!(well_formed(&a));
        assert!(well_formed(&b));
    }

    #[test]
    fn a_flipped_character_fails_the_checksum() {
        let key = generate().unwrap();
        let mut bytes = key.into_bytes();
        let i = KEY_PREFIX.len() + 3;
        bytes[i] = if bytes[i] == b'a' { b'b' } else { b'a' };
        assert!(!well_formed(&String::from_utf8(bytes).unwrap()));
    }

    #[test]
    fn wrong_shapes_are_refused() {
        assert!(!well_formed(""));
        assert!(!well_formed("sk-sg-short"));
        assert!(!well_formed(&format!("sk-xx-{}", "a".repeat(38))));
        assert!(!well_formed(&format!("{KEY_PREFIX}{}", "-".repeat(38))));
    }

    #[test]
    fn hash_is_hmac_sha256_and_hex_roundtrips() {
        // RFC 4231 test case 2.
        let hasher = KeyHasher::new(b"Jefe").unwrap();
        let digest = hasher.hash("what do ya want for nothing?");
        assert_eq!(hex_digest(&digest), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        assert_eq!(parse_hex_digest(&hex_digest(&digest)), Some(digest));
        assert!(digest_eq(&digest, &digest));
        assert_eq!(parse_hex_digest("zz"), None);
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::test_cases(1024)))]

        /// Any text at all is judged without a panic, and only real keys pass.
        #[test]
        fn the_key_parser_never_panics(text in ".{0,60}") {
            let _ = public_prefix(&text);
            if well_formed(&text) {
                prop_assert!(text.starts_with(KEY_PREFIX) && text.len() == KEY_LEN);
            }
        }

        /// A generated key passes; any one character changed fails its checksum.
        #[test]
        fn one_changed_character_is_caught(at in 0usize..KEY_LEN, with in "[0-9A-Za-z]") {
            let key = generate().unwrap();
            prop_assert!(well_formed(&key));
            let mut bytes = key.clone().into_bytes();
            let replacement = with.as_bytes()[0];
            prop_assume!(bytes[at] != replacement);
            bytes[at] = replacement;
            prop_assert!(!well_formed(&String::from_utf8(bytes).unwrap()));
        }
    }
}
