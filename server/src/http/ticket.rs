//! Tickets: the server's signature on one candidate it issued to one session.
//!
//! A ticket is `v1.<space checksum>.<seed>.<expiry>.<mac>` where `mac` is
//! HMAC-SHA256, under the server secret, of
//! `v1|<session id>|<kernel sha256>|<space checksum>|<seed>|<expiry>`.
//! A report must quote, for each kernel, a ticket whose MAC verifies for the
//! reporting session and that kernel and that has not expired; so a client
//! can only vote for kernels this server streamed to it, in the space it
//! streamed them from. Single use is enforced by the database (a unique
//! ticket column). The seed names the inputs of the output check that
//! issue 7 will verify on the server.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// How long a ticket stays valid, seconds.
pub const TICKET_TTL_S: u64 = 6 * 3600;

/// What a verified ticket says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TicketClaims {
    pub space_checksum: String,
    pub seed: u64,
    pub expiry: u64,
}

/// Why a ticket was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TicketError {
    #[error("is malformed (expected the `ticket` string of a queue candidate, unchanged)")]
    Malformed,
    #[error("was not issued for this session and kernel")]
    BadSignature,
    #[error("has expired; take a fresh queue")]
    Expired,
}

#[derive(Clone)]
pub struct Signer {
    secret: Vec<u8>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer { secret: <hidden> }")
    }
}

impl Signer {
    pub fn new(secret: &[u8]) -> Signer {
        Signer { secret: secret.to_vec() }
    }

    fn mac(&self, session: &str, kernel: &str, space: &str, seed: u64, expiry: u64) -> HmacSha256 {
        // HMAC takes keys of any length; this cannot fail.
        let mut mac = <HmacSha256 as Mac>::new_from_slice(&self.secret).expect("HMAC accepts any key length");
        mac.update(format!("v1|{session}|{kernel}|{space}|{seed}|{expiry}").as_bytes());
        mac
    }

    pub fn issue(&self, session: &str, kernel: &str, space: &str, seed: u64, expiry: u64) -> String {
        let tag = self.mac(session, kernel, space, seed, expiry).finalize().into_bytes();
        format!("v1.{space}.{seed}.{expiry}.{}", hex::encode(tag))
    }

    /// Checks `ticket` for `session` and `kernel` at time `now` (Unix seconds).
    pub fn verify(&self, ticket: &str, session: &str, kernel: &str, now: u64) -> Result<TicketClaims, TicketError> {
        let parts: Vec<&str> = ticket.split('.').collect();
        let [v, space, seed, expiry, tag] = parts.as_slice() else { return Err(TicketError::Malformed) };
        if *v != "v1" || space.is_empty() || space.len() > 128 || !space.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(TicketError::Malformed);
        }
        let seed: u64 = seed.parse().map_err(|_| TicketError::Malformed)?;
        let expiry: u64 = expiry.parse().map_err(|_| TicketError::Malformed)?;
        let tag = hex::decode(tag).map_err(|_| TicketError::Malformed)?;
        // verify_slice compares in constant time.
        self.mac(session, kernel, space, seed, expiry).verify_slice(&tag).map_err(|_| TicketError::BadSignature)?;
        if now > expiry {
            return Err(TicketError::Expired);
        }
        Ok(TicketClaims { space_checksum: space.to_string(), seed, expiry })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_forgeries() {
        let s = Signer::new(b"secret");
        let t = s.issue("sess", "abc", "sp1", 7, 100);
        assert_eq!(s.verify(&t, "sess", "abc", 50).unwrap(), TicketClaims { space_checksum: "sp1".into(), seed: 7, expiry: 100 });
        assert_eq!(s.verify(&t, "other", "abc", 50), Err(TicketError::BadSignature));
        assert_eq!(s.verify(&t, "sess", "abd", 50), Err(TicketError::BadSignature));
        assert_eq!(s.verify(&t, "sess", "abc", 101), Err(TicketError::Expired));
        assert_eq!(s.verify(&t.replace(".7.", ".8."), "sess", "abc", 50), Err(TicketError::BadSignature));
        assert_eq!(Signer::new(b"other").verify(&t, "sess", "abc", 50), Err(TicketError::BadSignature));
        assert_eq!(s.verify("v1.x", "sess", "abc", 50), Err(TicketError::Malformed));
    }
}
