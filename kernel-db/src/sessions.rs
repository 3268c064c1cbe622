//! Devices (fingerprints and their keys) and sessions.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::reports::AnyQuery;
use crate::{Db, DeviceKeys, DeviceRow, Result, Session, now_ms, random_id, sha256_hex};

/// The device's row, inserted or (known) its `last_seen` moved to `now`.
fn device_upsert<'q>(fp_sha: &'q str, fingerprint_json: &'q str, keys: &'q DeviceKeys, now: i64) -> AnyQuery<'q> {
    sqlx::query(
        "INSERT INTO devices (fingerprint_sha256, fingerprint, device_key, arch_key, vendor_key, rho, first_seen, last_seen) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7) \
         ON CONFLICT (fingerprint_sha256) DO UPDATE SET last_seen = excluded.last_seen",
    )
    .bind(fp_sha)
    .bind(fingerprint_json)
    .bind(&keys.device_key)
    .bind(&keys.arch_key)
    .bind(&keys.vendor_key)
    .bind(&keys.rho)
    .bind(now)
}

/// A session's row.
fn session_insert<'q>(id: &'q str, fp_sha: &'q str, keys: &'q DeviceKeys, now: i64) -> AnyQuery<'q> {
    sqlx::query(
        "INSERT INTO sessions (id, fingerprint_sha256, device_key, arch_key, vendor_key, rho, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(id)
    .bind(fp_sha)
    .bind(&keys.device_key)
    .bind(&keys.arch_key)
    .bind(&keys.vendor_key)
    .bind(&keys.rho)
    .bind(now)
}

impl Db {
    /// Records a fingerprint (canonical JSON) and its keys; updates `last_seen`
    /// when it is already known. Returns the fingerprint's SHA-256.
    pub async fn upsert_device(&self, fingerprint_json: &str, keys: &DeviceKeys) -> Result<String> {
        let fp_sha = sha256_hex(fingerprint_json.as_bytes());
        let now = now_ms();
        let _w = self.write.lock().await;
        device_upsert(&fp_sha, fingerprint_json, keys, now).execute(&self.pool).await?;
        Ok(fp_sha)
    }

    /// [`Db::upsert_device`] and [`Db::create_session`] in one transaction:
    /// one commit, so one sync of the log instead of two. On SQLite it goes
    /// through the writers' connection (`WriteConn::begin`) like a report
    /// group, so that it neither syncs twice nor makes that connection drop
    /// its page cache (a commit through another connection would). Returns
    /// the fingerprint's SHA-256 and the session.
    pub async fn open_session(&self, fingerprint_json: &str, keys: &DeviceKeys) -> Result<(String, Session)> {
        let fp_sha = sha256_hex(fingerprint_json.as_bytes());
        let id = random_id()?;
        let now = now_ms();
        let mut w = self.write.lock().await;
        let sqlite = self.backend == crate::Backend::Sqlite;
        let outcome = async {
            let mut tx = if sqlite { w.begin().await? } else { self.pool.begin().await? };
            device_upsert(&fp_sha, fingerprint_json, keys, now).execute(&mut *tx).await?;
            session_insert(&id, &fp_sha, keys, now).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok::<_, crate::DbError>(())
        }
        .await;
        if let Err(e) = outcome {
            if sqlite {
                w.failed(&e);
            }
            return Err(e);
        }
        Ok((fp_sha, Session { id, keys: keys.clone(), created_at: now }))
    }

    /// Opens a session for a device recorded by [`Db::upsert_device`].
    pub async fn create_session(&self, fingerprint_sha256: &str, keys: &DeviceKeys) -> Result<Session> {
        let id = random_id()?;
        let now = now_ms();
        let _w = self.write.lock().await;
        session_insert(&id, fingerprint_sha256, keys, now).execute(&self.pool).await?;
        Ok(Session { id, keys: keys.clone(), created_at: now })
    }

    pub async fn session(&self, id: &str) -> Result<Option<Session>> {
        let row = sqlx::query("SELECT id, device_key, arch_key, vendor_key, rho, created_at FROM sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| -> Result<Session> {
            Ok(Session {
                id: r.try_get("id")?,
                keys: DeviceKeys {
                    device_key: r.try_get("device_key")?,
                    arch_key: r.try_get("arch_key")?,
                    vendor_key: r.try_get("vendor_key")?,
                    rho: r.try_get("rho")?,
                },
                created_at: r.try_get("created_at")?,
            })
        })
        .transpose()
    }

    /// The keys and fingerprint last recorded for a device key, if any device
    /// with that key has been seen.
    pub async fn device(&self, device_key: &str) -> Result<Option<DeviceRow>> {
        let row = sqlx::query(
            "SELECT device_key, arch_key, vendor_key, rho, fingerprint, first_seen, last_seen FROM devices \
             WHERE device_key = $1 ORDER BY last_seen DESC LIMIT 1",
        )
        .bind(device_key)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(device_row).transpose()
    }
}

pub(crate) fn device_row(r: &AnyRow) -> Result<DeviceRow> {
    Ok(DeviceRow {
        keys: DeviceKeys {
            device_key: r.try_get("device_key")?,
            arch_key: r.try_get("arch_key")?,
            vendor_key: r.try_get("vendor_key")?,
            rho: r.try_get("rho")?,
        },
        fingerprint: r.try_get("fingerprint")?,
        first_seen: r.try_get("first_seen")?,
        last_seen: r.try_get("last_seen")?,
    })
}
