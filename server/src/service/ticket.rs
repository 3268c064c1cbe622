//! Tickets: the server's signature on one candidate it issued to one session.
//!
//! A ticket is `v2.<op>.<shape>.<target>.<space checksum>.<seed>.<expiry>.<mac>`
//! where `mac` is HMAC-SHA256, under the server secret, of
//! `v2|<session id>|<kernel sha256>|<op>|<shape>|<target>|<space checksum>|<seed>|<expiry>`.
//! A report must quote, for each kernel, a ticket whose MAC verifies for the
//! reporting session and that kernel and that has not expired; so a client
//! can only vote for kernels this server streamed to it, in the space it
//! streamed them from. The op, shape and target the server checks a report's
//! samples against come from the ticket ([`TicketClaims::kind`]), never from
//! the report: a report that names another shape cannot make the server
//! recompute (and flag) a correct kernel for the wrong one. Single use is
//! enforced by the database (a unique ticket column for measurements, and
//! for the flags of the server's own output check). The seed names the
//! inputs of that check. Tickets of the first format (`v1.`, without the
//! kind) are refused as malformed: they expire within [`TICKET_TTL_S`] anyway.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use webtune_kernel_db::KernelKind;

type HmacSha256 = Hmac<Sha256>;

/// How long a ticket stays valid, seconds.
pub const TICKET_TTL_S: u64 = 6 * 3600;

/// What a verified ticket says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TicketClaims {
    /// The op, shape (comma-separated) and target the kernel was issued for.
    pub kind: webtune_kernel_db::KernelKind,
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

    fn mac(&self, session: &str, kernel: &str, kind: &KernelKind, space: &str, seed: u64, expiry: u64) -> HmacSha256 {
        // HMAC takes keys of any length; this cannot fail.
        let mut mac = <HmacSha256 as Mac>::new_from_slice(&self.secret).expect("HMAC accepts any key length");
        let KernelKind { op, shape, target } = kind;
        mac.update(format!("v2|{session}|{kernel}|{op}|{shape}|{target}|{space}|{seed}|{expiry}").as_bytes());
        mac
    }

    /// A ticket for `kernel`, of kind `kind`, streamed to `session`.
    pub fn issue(&self, session: &str, kernel: &str, kind: &KernelKind, space: &str, seed: u64, expiry: u64) -> String {
        let tag = self.mac(session, kernel, kind, space, seed, expiry).finalize().into_bytes();
        let KernelKind { op, shape, target } = kind;
        format!("v2.{op}.{shape}.{target}.{space}.{seed}.{expiry}.{}", hex::encode(tag))
    }

    /// Checks `ticket` for `session` and `kernel` at time `now` (Unix seconds).
    pub fn verify(&self, ticket: &str, session: &str, kernel: &str, now: u64) -> Result<TicketClaims, TicketError> {
        let parts: Vec<&str> = ticket.split('.').collect();
        let [v, op, shape, target, space, seed, expiry, tag] = parts.as_slice() else { return Err(TicketError::Malformed) };
        let word =
            |s: &str, extra: u8| !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == extra);
        // An op may carry a fused epilogue (`matmul+bias+gelu`).
        if *v != "v2" || !word(op, b'+') || !word(shape, b',') || !word(target, b'_') || !word(space, b'-') {
            return Err(TicketError::Malformed);
        }
        let seed: u64 = seed.parse().map_err(|_| TicketError::Malformed)?;
        let expiry: u64 = expiry.parse().map_err(|_| TicketError::Malformed)?;
        let tag = hex::decode(tag).map_err(|_| TicketError::Malformed)?;
        let kind = KernelKind { op: op.to_string(), shape: shape.to_string(), target: target.to_string() };
        // verify_slice compares in constant time.
        self.mac(session, kernel, &kind, space, seed, expiry).verify_slice(&tag).map_err(|_| TicketError::BadSignature)?;
        if now > expiry {
            return Err(TicketError::Expired);
        }
        Ok(TicketClaims { kind, space_checksum: space.to_string(), seed, expiry })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_forgeries() {
        let s = Signer::new(b"secret");
        let kind = KernelKind { op: "matmul".into(), shape: "16,32,24".into(), target: "wgsl".into() };
        let t = s.issue("sess", "abc", &kind, "sp1", 7, 100);
        assert_eq!(
            s.verify(&t, "sess", "abc", 50).unwrap(),
            TicketClaims { kind: kind.clone(), space_checksum: "sp1".into(), seed: 7, expiry: 100 }
        );
        // The kind is signed: a ticket edited to another shape or target is forged.
        assert_eq!(s.verify(&t.replace("16,32,24", "16,32,25"), "sess", "abc", 50), Err(TicketError::BadSignature));
        assert_eq!(s.verify(&t.replace(".wgsl.", ".wasm."), "sess", "abc", 50), Err(TicketError::BadSignature));
        assert_eq!(s.verify("v1.sp1.7.100.00", "sess", "abc", 50), Err(TicketError::Malformed));
        assert_eq!(s.verify(&t, "other", "abc", 50), Err(TicketError::BadSignature));
        assert_eq!(s.verify(&t, "sess", "abd", 50), Err(TicketError::BadSignature));
        assert_eq!(s.verify(&t, "sess", "abc", 101), Err(TicketError::Expired));
        assert_eq!(s.verify(&t.replace(".7.", ".8."), "sess", "abc", 50), Err(TicketError::BadSignature));
        assert_eq!(Signer::new(b"other").verify(&t, "sess", "abc", 50), Err(TicketError::BadSignature));
        assert_eq!(s.verify("v1.x", "sess", "abc", 50), Err(TicketError::Malformed));
        // A fused op's ticket verifies, and its epilogue is signed too.
        let fused = KernelKind { op: "matmul+bias+gelu".into(), shape: "128,384,1536".into(), target: "wasm".into() };
        let t = s.issue("sess", "abc", &fused, "sp1", 7, 100);
        assert_eq!(s.verify(&t, "sess", "abc", 50).map(|c| c.kind), Ok(fused));
        assert_eq!(s.verify(&t.replace("+gelu", "+relu"), "sess", "abc", 50), Err(TicketError::BadSignature));
        assert_eq!(s.verify(&t.replace("+bias", "+bi/s"), "sess", "abc", 50), Err(TicketError::Malformed));
    }
}
