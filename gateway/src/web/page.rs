//! The page: our own HTML, script and style, compiled in, and xterm.js with its fit add-on,
//! read once at start from the npm install the build made (`--assets-dir`, a `node_modules`
//! directory installed from `gateway/web/package-lock.json`). Nothing is fetched from anywhere
//! else: the page works with no other network access.

use std::path::{Path, PathBuf};

use axum::body::Body;
use bytes::Bytes;
use http::{Response, StatusCode, header};

/// The files under `--assets-dir` the page loads, by the path it loads them from.
pub const VENDOR: [(&str, &str, &str); 3] = [
    ("/vendor/xterm.js", "@xterm/xterm/lib/xterm.js", "text/javascript"),
    ("/vendor/xterm.css", "@xterm/xterm/css/xterm.css", "text/css"),
    ("/vendor/addon-fit.js", "@xterm/addon-fit/lib/addon-fit.js", "text/javascript"),
];

const OWN: [(&str, &str, &str); 4] = [
    ("/", include_str!("../../web/index.html"), "text/html; charset=utf-8"),
    ("/app.js", include_str!("../../web/app.js"), "text/javascript"),
    ("/shells.js", include_str!("../../web/shells.js"), "text/javascript"),
    ("/app.css", include_str!("../../web/app.css"), "text/css"),
];

/// Why the page's files could not be read.
#[derive(Debug, thiserror::Error)]
#[error(
    "--assets-dir {dir}: cannot read {file}: {source} (install them with `npm ci` in gateway/web, or run `cargo xtask web`)"
)]
pub struct AssetsError {
    dir: PathBuf,
    file: &'static str,
    source: std::io::Error,
}

/// Every file the page loads, in memory.
#[derive(Debug, Clone)]
pub struct Assets {
    files: Vec<(&'static str, Bytes, &'static str)>,
}

impl Assets {
    /// Read the vendored files from `dir` (a `node_modules` directory).
    pub fn load(dir: &Path) -> Result<Self, AssetsError> {
        let mut files: Vec<_> =
            OWN.iter().map(|(path, text, kind)| (*path, Bytes::from_static(text.as_bytes()), *kind)).collect();
        for (path, file, kind) in VENDOR {
            let bytes =
                std::fs::read(dir.join(file)).map_err(|source| AssetsError { dir: dir.to_owned(), file, source })?;
            files.push((path, Bytes::from(bytes), kind));
        }
        Ok(Self { files })
    }

    /// The response for `path`, if it is one of the page's files.
    pub fn get(&self, path: &str) -> Option<Response<Body>> {
        let (_, bytes, kind) = self.files.iter().find(|(p, _, _)| *p == path)?;
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, *kind)
            .body(Body::from(bytes.clone()))
            .ok()
    }
}
