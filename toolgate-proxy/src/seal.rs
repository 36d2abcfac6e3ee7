//! Sealed `requestState` (MCP 2026-07-28, SEP-2322): the engine's seal
//! payload (docs/spec.md §8) encrypted and authenticated with the gateway's
//! keys, so the client carries a pending confirmation it can neither read nor
//! forge.
//!
//! The construction is the official Python SDK's `AESGCMRequestStateCodec`
//! (mcp 2.3) with toolgate's own labels, so a token of one can never be
//! opened as the other even under the same operator secret:
//! - key = HKDF-SHA256(secret, no salt, info `toolgate/request-state/v1/aes-256-gcm`), 32 bytes;
//! - key id = SHA-256(`toolgate/request-state/v1/kid:` ‖ key)[..4], a public fingerprint;
//! - token = `tg1.` ‖ base64url-unpadded(key id ‖ 12-byte random nonce ‖ AES-256-GCM(payload) ‖ tag),
//!   with `tg1.` ‖ key id as associated data.
//!
//! A ring of keys: the first seals, every key opens (rotation without
//! dropping pending confirmations). What the payload binds and when it
//! expires is checked by the engine; one-time use by the ledger.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

const PREFIX: &str = "tg1.";
const KDF_INFO: &[u8] = b"toolgate/request-state/v1/aes-256-gcm";
const KID_INFO: &[u8] = b"toolgate/request-state/v1/kid:";
const KID_LEN: usize = 4;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// An operator secret shorter than this is refused.
pub const MIN_SECRET_LEN: usize = 32;
/// The longest token opened: a seal payload is a few hundred bytes.
const MAX_TOKEN_LEN: usize = 16 * 1024;

/// Why a key ring could not be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("no state secret given")]
    Empty,
    #[error("state secret {index} is {len} bytes; at least {MIN_SECRET_LEN} bytes of secret randomness are needed")]
    TooShort { index: usize, len: usize },
    #[error("state secret {index} repeats an earlier one")]
    Duplicate { index: usize },
    #[error("no randomness available for a key: {0}")]
    Random(String),
    /// `open` refuses a token this long, so it is not handed out: the retry
    /// would fail as `CONFIRMATION_INVALID` with nothing said about size.
    #[error("the sealed state would be {len} bytes, over the {MAX_TOKEN_LEN} a retry may carry")]
    TooLarge { len: usize },
}

/// Why a token was not opened. Callers answer every one of these alike
/// (`CONFIRMATION_INVALID`): which check failed is for the log only.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    #[error("malformed token")]
    Malformed,
    #[error("sealed with a key this gateway does not hold")]
    UnknownKey,
    #[error("altered or forged token")]
    Forged,
}

struct RingKey {
    kid: [u8; KID_LEN],
    cipher: Aes256Gcm,
}

/// The gateway's sealing keys.
pub struct KeyRing {
    keys: Vec<RingKey>,
    /// Whether the key was made up at start (one replica only).
    ephemeral: bool,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRing")
            .field("keys", &self.keys.len())
            .field("ephemeral", &self.ephemeral)
            .finish()
    }
}

fn derive(secret: &[u8]) -> RingKey {
    let hkdf = hkdf::Hkdf::<Sha256>::new(None, secret);
    let mut key = [0u8; 32];
    // 32 bytes is far below HKDF-SHA256's output limit: this cannot fail.
    let _ = hkdf.expand(KDF_INFO, &mut key);
    let mut kid = [0u8; KID_LEN];
    let digest = Sha256::new().chain_update(KID_INFO).chain_update(key).finalize();
    kid.copy_from_slice(digest.get(..KID_LEN).unwrap_or(&[0; KID_LEN]));
    RingKey {
        kid,
        cipher: Aes256Gcm::new(&key.into()),
    }
}

impl KeyRing {
    /// A ring from operator secrets, the sealing one first.
    pub fn new<S: AsRef<[u8]>>(secrets: &[S]) -> Result<KeyRing, KeyError> {
        if secrets.is_empty() {
            return Err(KeyError::Empty);
        }
        let mut keys: Vec<RingKey> = Vec::with_capacity(secrets.len());
        for (index, secret) in secrets.iter().enumerate() {
            let secret = secret.as_ref();
            if secret.len() < MIN_SECRET_LEN {
                return Err(KeyError::TooShort {
                    index,
                    len: secret.len(),
                });
            }
            let key = derive(secret);
            if keys.iter().any(|k| k.kid == key.kid) {
                return Err(KeyError::Duplicate { index });
            }
            keys.push(key);
        }
        Ok(KeyRing { keys, ephemeral: false })
    }

    /// A random key for this process only.
    pub fn ephemeral() -> Result<KeyRing, KeyError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| KeyError::Random(e.to_string()))?;
        let mut ring = KeyRing::new(&[secret])?;
        ring.ephemeral = true;
        Ok(ring)
    }

    /// Secrets from text: one per line (blank lines and `#` comments
    /// skipped), the sealing secret first, as in `--state-secret-file`
    /// and `TOOLGATE_STATE_SECRET` (where `,` also separates).
    pub fn from_text(text: &str) -> Result<KeyRing, KeyError> {
        let secrets: Vec<&str> = text
            .lines()
            .flat_map(|line| line.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty() && !s.starts_with('#'))
            .collect();
        KeyRing::new(&secrets)
    }

    pub fn is_ephemeral(&self) -> bool {
        self.ephemeral
    }

    /// The sealing key's public fingerprint (hex), for start-up messages.
    pub fn fingerprint(&self) -> String {
        self.keys
            .first()
            .map(|k| k.kid.iter().map(|b| format!("{b:02x}")).collect())
            .unwrap_or_default()
    }

    /// Encrypts `payload` under the first key.
    pub fn seal(&self, payload: &[u8]) -> Result<String, KeyError> {
        let key = self.keys.first().ok_or(KeyError::Empty)?;
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| KeyError::Random(e.to_string()))?;
        let aad = associated_data(&key.kid);
        let sealed = key
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: payload,
                    aad: &aad,
                },
            )
            .map_err(|_| KeyError::Random("encryption failed".into()))?;
        let mut raw = Vec::with_capacity(KID_LEN + NONCE_LEN + sealed.len());
        raw.extend_from_slice(&key.kid);
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&sealed);
        let token = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(raw));
        if token.len() > MAX_TOKEN_LEN {
            return Err(KeyError::TooLarge { len: token.len() });
        }
        Ok(token)
    }

    /// Decrypts a token sealed by any key of the ring.
    pub fn open(&self, token: &str) -> Result<Vec<u8>, OpenError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(OpenError::Malformed);
        }
        let body = token.strip_prefix(PREFIX).ok_or(OpenError::Malformed)?;
        let raw = URL_SAFE_NO_PAD.decode(body).map_err(|_| OpenError::Malformed)?;
        // Only the canonical encoding opens: one token, one spelling.
        if URL_SAFE_NO_PAD.encode(&raw) != body || raw.len() < KID_LEN + NONCE_LEN + TAG_LEN {
            return Err(OpenError::Malformed);
        }
        let (kid, rest) = raw.split_at(KID_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let key = self
            .keys
            .iter()
            .find(|k| k.kid.as_slice() == kid)
            .ok_or(OpenError::UnknownKey)?;
        let aad = associated_data(&key.kid);
        key.cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: sealed, aad: &aad })
            .map_err(|_| OpenError::Forged)
    }
}

fn associated_data(kid: &[u8; KID_LEN]) -> Vec<u8> {
    let mut aad = PREFIX.as_bytes().to_vec();
    aad.extend_from_slice(kid);
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "an-operator-secret-of-at-least-32-bytes-A";
    const B: &str = "an-operator-secret-of-at-least-32-bytes-B";

    #[test]
    fn seals_and_opens_with_rotation() {
        let old = KeyRing::new(&[A]).unwrap();
        let token = old.seal(b"payload").unwrap();
        assert!(token.starts_with("tg1."));
        assert_eq!(old.open(&token).unwrap(), b"payload");
        // Rotated: B seals, A still opens.
        let rotated = KeyRing::new(&[B, A]).unwrap();
        assert_eq!(rotated.open(&token).unwrap(), b"payload");
        assert_eq!(old.open(&rotated.seal(b"new").unwrap()), Err(OpenError::UnknownKey));
        // Two seals of one payload differ (fresh nonce).
        assert_ne!(old.seal(b"payload").unwrap(), token);
    }

    /// What `open` would refuse for its size is not sealed at all.
    #[test]
    fn a_state_too_large_to_open_is_not_sealed() {
        let ring = KeyRing::new(&[A]).unwrap();
        let fits = ring.seal(&[b'x'; 12_000]).unwrap();
        assert_eq!(ring.open(&fits).unwrap().len(), 12_000);
        assert!(matches!(ring.seal(&[b'x'; 12_300]), Err(KeyError::TooLarge { len }) if len > MAX_TOKEN_LEN));
    }

    #[test]
    fn refuses_other_keys_tampering_and_bad_secrets() {
        let ring = KeyRing::new(&[A]).unwrap();
        let token = ring.seal(b"payload").unwrap();
        assert_eq!(KeyRing::new(&[B]).unwrap().open(&token), Err(OpenError::UnknownKey));
        let mut raw = URL_SAFE_NO_PAD.decode(token.strip_prefix(PREFIX).unwrap()).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        let tampered = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(&raw));
        assert_eq!(ring.open(&tampered), Err(OpenError::Forged));
        raw[last] ^= 1;
        raw[KID_LEN + NONCE_LEN] ^= 0x80;
        let tampered = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(&raw));
        assert_eq!(ring.open(&tampered), Err(OpenError::Forged));
        for bad in [
            "",
            "tg1.",
            "v1.abc",
            "tg1.!!!!",
            &format!("{token}="),
            &token.replace("tg1.", "tg2."),
        ] {
            assert!(ring.open(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            KeyRing::new(&["short"]).unwrap_err(),
            KeyError::TooShort { index: 0, len: 5 }
        );
        assert_eq!(KeyRing::new(&[A, A]).unwrap_err(), KeyError::Duplicate { index: 1 });
        assert_eq!(KeyRing::new::<&str>(&[]).unwrap_err(), KeyError::Empty);
        let from_text = KeyRing::from_text(&format!("# current first\n{B}\n\n{A}\n")).unwrap();
        assert_eq!(from_text.open(&token).unwrap(), b"payload");
        assert!(KeyRing::ephemeral().unwrap().is_ephemeral());
    }
}

/// `tests/vectors/seals/request-state.json`: tokens this gateway sealed,
/// which every host's codec must open to the same payload (or refuse), and
/// whose payloads the engine must then accept for the call. Written once
/// with `TOOLGATE_WRITE_SEAL_VECTORS=1 cargo test -p toolgate-proxy seal_vectors`
/// (nonces are random), checked by every run.
#[cfg(test)]
mod vectors {
    use super::*;
    use serde_json::{Value, json};

    const CURRENT: &str = "toolgate-seal-vectors-current-secret-0123456789";
    const PREVIOUS: &str = "toolgate-seal-vectors-previous-secret-abcdefghij";
    const FOREIGN: &str = "toolgate-seal-vectors-foreign-secret-ZYXWVUTSRQ";

    fn path() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/seals/request-state.json")
    }

    fn payload_for(rules: &policy_core::Rules, call: &Value, id: &str) -> String {
        rules
            .seal_payload(call.to_string().as_bytes(), "user-7", id, 1_900_000_000_000)
            .unwrap()
    }

    fn write() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/fixtures");
        let rules = policy_core::Rules::load(
            Some(&std::fs::read_to_string(dir.join("plans-policy.yaml")).unwrap()),
            &std::fs::read_to_string(dir.join("plans-catalog.json")).unwrap(),
        )
        .unwrap();
        let call = json!({"name": "alterar_plano", "arguments": {"customer_id": "c-1", "new_plan_id": "PRO"}});
        let current = KeyRing::new(&[CURRENT]).unwrap();
        let previous = KeyRing::new(&[PREVIOUS]).unwrap();
        let foreign = KeyRing::new(&[FOREIGN]).unwrap();
        let p1 = payload_for(&rules, &call, "AAAAAAAAAAAAAAAAAAAAAA");
        let p2 = payload_for(&rules, &call, "BBBBBBBBBBBBBBBBBBBBBB");
        let t1 = current.seal(p1.as_bytes()).unwrap();
        let t2 = previous.seal(p2.as_bytes()).unwrap();
        let mut raw = URL_SAFE_NO_PAD.decode(t1.strip_prefix(PREFIX).unwrap()).unwrap();
        let at = raw.len() - 20;
        raw[at] ^= 0x01;
        let tampered = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(&raw));
        let now = 1_899_999_000_000u64;
        let case = |name: &str, token: &str, payload: Option<&str>, call: &Value, code: Value| json!({"name": name, "token": token, "payload": payload, "call": call, "caller": "user-7", "now_ms": now, "expect_code": code});
        let other_call = json!({"name": "alterar_plano", "arguments": {"customer_id": "c-1", "new_plan_id": "MAX"}});
        let doc = json!({
            "spec": "§8",
            "description": "requestState tokens sealed by the Rust gateway (toolgate-proxy/src/seal.rs: AES-256-GCM under HKDF-SHA256, `tg1.` + base64url(key id | nonce | ciphertext | tag)). Every host opens each token with the ring `secrets` (the first seals, all open) to exactly `payload`, or refuses it when `payload` is null; then decides `call` with the opened payload as a seal (caller, now_ms) against the plans fixtures and gets `expect_code`.",
            "secrets": [CURRENT, PREVIOUS],
            "policy": "../fixtures/plans-policy.yaml",
            "catalog": "../fixtures/plans-catalog.json",
            "cases": [
                case("sealed with the current key", &t1, Some(&p1), &call, Value::Null),
                case("sealed with the previous key (rotation)", &t2, Some(&p2), &call, Value::Null),
                case("opened, but retried with other arguments", &t1, Some(&p1), &other_call, json!("CONFIRMATION_INVALID")),
                case("sealed with a key not in the ring", &foreign.seal(p1.as_bytes()).unwrap(), None, &call, Value::Null),
                case("one ciphertext bit flipped", &tampered, None, &call, Value::Null),
                case("padded base64 (not the canonical spelling)", &format!("{t1}="), None, &call, Value::Null),
                case("another format's prefix", &t1.replacen("tg1.", "v1.", 1), None, &call, Value::Null),
            ]
        });
        let mut text = serde_json::to_string_pretty(&doc).unwrap();
        text.push('\n');
        std::fs::write(path(), text).unwrap();
    }

    #[test]
    fn seal_vectors() {
        if std::env::var_os("TOOLGATE_WRITE_SEAL_VECTORS").is_some() {
            write();
        }
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path()).unwrap()).unwrap();
        let secrets: Vec<&str> = doc["secrets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        let ring = KeyRing::new(&secrets).unwrap();
        let dir = path().parent().unwrap().to_owned();
        let rules = policy_core::Rules::load(
            Some(&std::fs::read_to_string(dir.join(doc["policy"].as_str().unwrap())).unwrap()),
            &std::fs::read_to_string(dir.join(doc["catalog"].as_str().unwrap())).unwrap(),
        )
        .unwrap();
        for case in doc["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let opened = ring.open(case["token"].as_str().unwrap());
            match case["payload"].as_str() {
                None => assert!(opened.is_err(), "{name}: opened"),
                Some(payload) => {
                    let opened = String::from_utf8(opened.unwrap_or_else(|e| panic!("{name}: {e}"))).unwrap();
                    assert_eq!(opened, payload, "{name}");
                    let outcome = rules.decide(
                        case["call"].to_string().as_bytes(),
                        "{}",
                        policy_core::Confirmation::Seal(policy_core::OpenedSeal {
                            payload: &opened,
                            caller: case["caller"].as_str().unwrap(),
                            now_ms: case["now_ms"].as_u64().unwrap(),
                        }),
                    );
                    assert_eq!(
                        outcome.decision.code.map(|c| c.as_str()),
                        case["expect_code"].as_str(),
                        "{name}"
                    );
                }
            }
        }
    }
}
