//! Compiled kernels, content-addressed by the SHA-256 of their bytes.

use sqlx::Row;

use crate::{Db, KernelKind, NewKernel, Result, now_ms};

impl Db {
    /// Stores a kernel unless one with the same hash is there already.
    pub async fn put_kernel(&self, k: &NewKernel) -> Result<()> {
        let _w = self.write.lock().await;
        insert_kernel(&mut *self.pool.acquire().await?, k, now_ms()).await
    }

    /// A kernel's bytes and target.
    pub async fn kernel_bytes(&self, sha256: &str) -> Result<Option<(Vec<u8>, String)>> {
        let row = sqlx::query("SELECT bytes, target FROM kernels WHERE sha256 = $1").bind(sha256).fetch_optional(&self.pool).await?;
        row.map(|r| -> Result<_> { Ok((r.try_get("bytes")?, r.try_get("target")?)) }).transpose()
    }

    /// A kernel's kind and metadata JSON.
    pub async fn kernel_meta(&self, sha256: &str) -> Result<Option<(KernelKind, String)>> {
        let row =
            sqlx::query("SELECT op, shape, target, meta FROM kernels WHERE sha256 = $1").bind(sha256).fetch_optional(&self.pool).await?;
        row.map(|r| -> Result<_> {
            Ok((KernelKind { op: r.try_get("op")?, shape: r.try_get("shape")?, target: r.try_get("target")? }, r.try_get("meta")?))
        })
        .transpose()
    }
}

/// Stores `k` on `conn` (a pooled connection or a transaction's) unless a
/// kernel with its hash is there already.
pub(crate) async fn insert_kernel(conn: &mut sqlx::AnyConnection, k: &NewKernel, now: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO kernels (sha256, op, shape, target, schedule, meta, bytes, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (sha256) DO NOTHING",
    )
    .bind(&k.sha256)
    .bind(&k.kind.op)
    .bind(&k.kind.shape)
    .bind(&k.kind.target)
    .bind(&k.schedule_json)
    .bind(&k.meta_json)
    .bind(&k.bytes)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
