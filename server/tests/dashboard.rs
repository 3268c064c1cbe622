//! `/dashboard` on the in-process router: what clients wrote (device keys,
//! fingerprints) is escaped in the tables and in the charts' labels, and
//! the page number is checked: a page past the end is an empty page that
//! says so (200), a page that is not a whole number from 1 is a 400 that
//! says what to give, never a 500.

use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode};
use tower::ServiceExt;
use webtune::http::{App, Config, router};
use webtune_kernel_db::{DeviceKeys, random_id};

async fn app() -> Arc<App> {
    let dir = std::env::temp_dir().join(format!("webtune-dash-{}", random_id().unwrap()));
    std::fs::create_dir_all(&dir).unwrap();
    App::new(&format!("sqlite://{}", dir.join("db.sqlite").display()), Config::default()).await.unwrap()
}

async fn get(app: &Arc<App>, path: &str) -> (StatusCode, String) {
    let res = router(app.clone()).oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
    let status = res.status();
    let body = to_bytes(res.into_body(), usize::MAX).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

fn keys(device: &str, arch: &str, vendor: &str) -> DeviceKeys {
    DeviceKeys { device_key: device.into(), arch_key: arch.into(), vendor_key: vendor.into(), rho: "1011".into() }
}

#[tokio::test]
async fn client_strings_are_escaped_in_tables_and_charts() {
    let app = app().await;
    let evil = "<script>alert(1)</script>";
    let fp = format!(r#"{{"browser":{{"name":"</code>{evil}","version":"1\" onload=\"x"}}}}"#);
    app.service
        .db()
        .upsert_device(&fp, &keys(&format!("cpu-x86-{evil}"), &format!("cpu-x86-{evil}"), &format!("cpu-{evil}")))
        .await
        .unwrap();
    let (status, html) = get(&app, "/dashboard").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!html.contains("<script"), "an unescaped script tag in the page");
    assert!(!html.contains("\" onload=\""), "an attribute broke out of its quotes");
    // In the devices table and in both bar charts (their labels and tooltips).
    let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
    assert!(html.contains(&format!("<td>cpu-x86-{escaped}</td>")));
    assert!(html.contains("&lt;/code&gt;&lt;script&gt;"));
    for chart in ["devices-by-vendor", "devices-by-arch"] {
        let at = html.find(&format!("id=\"{chart}\"")).unwrap_or_else(|| panic!("no chart {chart}"));
        let svg = &html[at..at + html[at..].find("</svg>").unwrap()];
        assert!(svg.contains(escaped), "{chart}: {svg}");
        assert_eq!(svg.matches("class=\"bar\"").count(), 1, "{chart}");
    }
    // `/` is the same page.
    let (status, root) = get(&app, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(root.contains("id=\"devices-by-vendor\"") && !root.contains("<script"));
}

#[tokio::test]
async fn pages_past_the_end_are_empty_and_bad_pages_are_400() {
    let app = app().await;
    // An empty database: one page, every chart drawn, the lists say so.
    let (status, html) = get(&app, "/dashboard").await;
    assert_eq!(status, StatusCode::OK);
    for id in ["convergence", "reports-per-hour", "flags-per-hour", "refused", "devices-by-vendor", "devices-by-arch"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "no chart {id}");
    }
    assert!(html.contains("page 1 of 1") && html.contains("None yet."));
    assert_eq!(html.matches("class=\"col\"").count(), 2 * 48, "two hourly charts of 48 columns");

    // 120 devices: three pages of 50, 50 and 20.
    for i in 0..120 {
        let k = format!("cpu-x86-avx2-d{i:03}.1011");
        app.service.db().upsert_device(&format!(r#"{{"n":{i}}}"#), &keys(&k, "cpu-x86-avx2", "cpu-x86")).await.unwrap();
    }
    let rows = |html: &str| {
        let at = html.find("id=\"devices\"").unwrap();
        html[at..at + html[at..].find("</table>").unwrap()].matches("<tr><td>cpu-x86").count()
    };
    let (_, p1) = get(&app, "/dashboard").await;
    let (_, p3) = get(&app, "/dashboard?page=3").await;
    assert_eq!((rows(&p1), rows(&p3)), (50, 20));
    assert!(p1.contains("page 1 of 3") && p1.contains("href=\"/dashboard?page=2\""));
    assert!(p3.contains("href=\"/dashboard?page=2\"") && !p3.contains("href=\"/dashboard?page=4\""));
    assert!(!p1.contains("id=\"past-end\""));

    for past in ["4", "4000000000"] {
        let (status, html) = get(&app, &format!("/dashboard?page={past}")).await;
        assert_eq!(status, StatusCode::OK, "page {past}");
        assert_eq!(rows(&html), 0);
        assert!(html.contains("id=\"past-end\"") && html.contains("the last page is 3"), "page {past}");
        assert!(html.contains("No rows on page") && html.contains("href=\"/dashboard?page=3\""));
    }
    for bad in ["0", "-1", "abc", "1.5", "99999999999", "%3Cscript%3E", "1&page=2"] {
        let (status, body) = get(&app, &format!("/dashboard?page={bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "page={bad}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(v["error"].as_str().unwrap().contains("whole number from 1"), "page={bad}: {body}");
        assert!(!body.contains("<script"));
    }
    let (status, _) = get(&app, "/dashboard?page=").await;
    assert_eq!(status, StatusCode::OK, "an empty page is the first");
}
