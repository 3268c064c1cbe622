//! What the kernel database's tests share: fresh databases on both
//! engines, keys, kernels and sessions.
#![allow(dead_code)]

use webtune_kernel_db::{Db, DeviceKeys, KernelKind, NewKernel, random_id, sha256_hex};

pub async fn sqlite() -> Db {
    Db::connect(&sqlite_url()).await.unwrap()
}

/// A SQLite file in a fresh temporary folder (created on connect).
pub fn sqlite_url() -> String {
    let dir = std::env::temp_dir().join(format!("webtune-kdb-{}", random_id().unwrap()));
    std::fs::create_dir_all(&dir).unwrap();
    format!("sqlite://{}", dir.join("t.sqlite").display())
}

/// A fresh database on the test cluster at `WEBTUNE_TEST_PG_URL`.
pub async fn postgres() -> Db {
    Db::connect(&postgres_url().await).await.unwrap()
}

/// An empty database on the test cluster.
pub async fn postgres_url() -> String {
    let base = std::env::var("WEBTUNE_TEST_PG_URL")
        .expect("WEBTUNE_TEST_PG_URL must be set: scripts/test.sh starts PostgreSQL and runs this test");
    let admin = Db::connect(&base).await.unwrap();
    let name = format!("kdb_{}", random_id().unwrap());
    admin.create_database(&name).await.unwrap();
    format!("{}/{name}", base.rsplit_once('/').unwrap().0)
}

pub fn keys(device: &str, arch: &str, vendor: &str) -> DeviceKeys {
    DeviceKeys { device_key: device.into(), arch_key: arch.into(), vendor_key: vendor.into(), rho: "101".into() }
}

pub fn kind() -> KernelKind {
    KernelKind { op: "matmul".into(), shape: "64,64,64".into(), target: "wasm".into() }
}

pub async fn kernel(db: &Db, n: u8) -> String {
    let bytes = vec![0, 97, 115, 109, n];
    let sha = sha256_hex(&bytes);
    db.put_kernel(&NewKernel { sha256: sha.clone(), kind: kind(), schedule_json: "{}".into(), meta_json: format!("{{\"n\":{n}}}"), bytes })
        .await
        .unwrap();
    sha
}

pub async fn session(db: &Db, k: &DeviceKeys) -> String {
    let fp = format!("{{\"device\":\"{}\"}}", k.device_key);
    db.open_session(&fp, k).await.unwrap().1.id
}
