//! Static assets, embedded in the binary: the stylesheet, the vendored htmx (0BSD, 2.0.11) and
//! a few lines of script. Their URLs carry a hash of their content, so browsers may cache them
//! for a year and still never run a stale copy.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: [Asset; 4] = [
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../assets/app.css"),
    },
    Asset {
        name: "status.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../assets/status.css"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/app.js"),
    },
    Asset {
        name: "htmx.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/htmx.min.js"),
    },
];

/// Each asset's name with its content hash: `app.css?v=…`.
static VERSIONED: LazyLock<Vec<(&'static str, String)>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|asset| {
            let digest = hex::encode(Sha256::digest(asset.body.as_bytes()));
            (
                asset.name,
                format!("/assets/{}?v={}", asset.name, &digest[..12]),
            )
        })
        .collect()
});

/// The URL of an embedded asset.
pub fn path(name: &str) -> &'static str {
    VERSIONED
        .iter()
        .find(|(asset, _)| *asset == name)
        .map(|(_, path)| path.as_str())
        .unwrap_or("/assets/missing")
}

pub async fn serve(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|asset| asset.name == name) {
        Some(asset) => (
            [
                (header::CONTENT_TYPE, asset.content_type),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            ],
            asset.body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}
