//! Sessions: a fingerprint becomes device keys and a session row; a session
//! id becomes the session (cached, a row never changes).

use std::sync::atomic::Ordering;

use webtune_kernel_db::Session;

use super::protocol::{SessionRequest, SessionResponse};
use super::{Error, Result, Service, cache_insert, device, is_hex, lock};

impl Service {
    /// Opens a session for a device fingerprint.
    pub async fn open_session(&self, req: &SessionRequest) -> Result<SessionResponse> {
        let keys = device::keys_for(&req.fingerprint).map_err(Error::unprocessable)?;
        // Known fields only, bounded (docs/device-keys.md: unknown fields are ignored).
        let canonical = device::stored_fingerprint(&req.fingerprint).map_err(Error::unprocessable)?;
        let (_, s) = self.db.open_session(&canonical, &keys).await?;
        self.metrics.sessions.fetch_add(1, Ordering::Relaxed);
        Ok(SessionResponse {
            session_id: s.id,
            device_key: keys.device_key,
            arch_key: keys.arch_key,
            vendor_key: keys.vendor_key,
            rho: keys.rho,
        })
    }

    /// The session `id`, or 404 with how to open one.
    pub async fn session(&self, id: &str) -> Result<Session> {
        let unknown = || Error::not_found(format!("unknown session `{id}`: open one with POST /v1/sessions"));
        if !is_hex(id, 32) {
            return Err(unknown());
        }
        if let Some(s) = lock(&self.sessions).get(id) {
            return Ok(s.clone());
        }
        let s = self.db.session(id).await?.ok_or_else(unknown)?;
        cache_insert(&mut lock(&self.sessions), id.to_string(), s.clone());
        Ok(s)
    }
}
