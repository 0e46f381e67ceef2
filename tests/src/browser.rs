//! A real browser for tests: Debian's Chromium, headless, driven over the DevTools protocol.
//!
//! The protocol is JSON over one WebSocket: a command `{id, method, params, sessionId}` gets an
//! answer with the same id; events come in between and are skipped. Tests need six commands
//! (open a tab, attach, navigate, evaluate, type, screenshot), so this speaks them directly
//! over the tokio-tungstenite the workspace already has, rather than through a CDP crate that
//! compiles the whole generated protocol (hundreds of thousands of lines) for them.
//!
//! Chromium runs as a [`ManagedProcess`] (its own process group, killed with the test, even on
//! a panic), with a throwaway profile, `--no-sandbox` (it runs as root here) and
//! `--ignore-certificate-errors` (the gateway under test serves a certificate of its own CA).
//!
//! It runs in a network namespace of its own ([`HeldNetwork`], only a loopback) and reaches the
//! tests' servers (on the host's loopback, and the clusters' Services the host routes to)
//! through [`socks`]. Why: Chromium fails the connections
//! it is still setting up (TCP, and TLS on top) with `ERR_NETWORK_CHANGED` whenever an address
//! comes or goes on any interface it can see, and the harness adds one on the host for every
//! cluster it starts and removes it when the cluster stops (`envtest/src/node/network.rs`). A
//! page through a port-forward, whose TLS handshake goes through the apiserver and the kubelet,
//! failed to load that way when the other lane of `cargo xtask test` started a cluster. In a
//! namespace of its own the browser sees no such change (`tests/tests/node/browser.rs`).

mod socks;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use futures::{SinkExt, StreamExt};
use myownshell_envtest::node::netns::HeldNetwork;
use myownshell_envtest::process::{ManagedProcess, ProcessSpec};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

/// Where Chromium is, unless `CHROMIUM` says otherwise.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// How long one DevTools command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// A headless Chromium and its DevTools connection.
pub struct Browser {
    // Dropped in this order: the connection closes before the process is killed, the proxy
    // stops after it, and the namespace goes last.
    devtools: WebSocketStream<TcpStream>,
    next_id: u64,
    _process: ManagedProcess,
    _proxy: Proxy,
    network: HeldNetwork,
    profile: tempfile::TempDir,
}

/// The SOCKS proxy's task, stopped when the browser is dropped.
struct Proxy(tokio::task::JoinHandle<()>);

impl Drop for Proxy {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One tab.
#[derive(Debug, Clone)]
pub struct Tab {
    session: String,
}

/// The Chromium binary to run.
pub fn chromium() -> PathBuf {
    std::env::var_os("CHROMIUM").filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| CHROMIUM.into())
}

impl Browser {
    /// Start Chromium and connect to it.
    pub async fn launch() -> Result<Self, String> {
        let profile = tempfile::Builder::new().prefix("chromium-").tempdir().map_err(|e| e.to_string())?;
        let network = HeldNetwork::start("chromium-network", &profile.path().join("network.log"))?;
        network.inside("ip link set lo up")?;
        let listener = network
            .enter(|| std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
            .and_then(tokio::net::TcpListener::from_std)
            .map_err(|e| format!("the browser's proxy in its namespace: {e}"))?;
        let proxy_port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let proxy = Proxy(tokio::spawn(socks::serve(listener)));
        let spec = ProcessSpec::new("chromium", "nsenter", profile.path().join("chromium.log")).args([
            format!("--net=/proc/{}/ns/net", network.pid()),
            "--".into(),
            chromium().display().to_string(),
            "--headless=new".into(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--no-first-run".into(),
            "--no-default-browser-check".into(),
            "--ignore-certificate-errors".into(),
            "--window-size=1200,800".into(),
            "--remote-debugging-port=0".into(),
            // Everything through the proxy, the loopback too (Chromium skips proxies for it
            // unless told otherwise): the namespace's loopback has nothing on it but the proxy.
            format!("--proxy-server=socks5://127.0.0.1:{proxy_port}"),
            "--proxy-bypass-list=<-loopback>".into(),
            format!("--user-data-dir={}", profile.path().display()),
            "about:blank".into(),
        ]);
        let process = ManagedProcess::spawn(spec).map_err(|e| format!("starting {}: {e}", chromium().display()))?;
        let (port, path) = devtools_address(profile.path(), &process).await?;
        // Chromium listens on its namespace's loopback: connect from inside it.
        let tcp = network
            .enter(|| std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)))
            .and_then(|tcp| tcp.set_nonblocking(true).map(|()| tcp))
            .and_then(TcpStream::from_std)
            .map_err(|e| format!("DevTools port {port}: {e}"))?;
        let (devtools, _) = tokio_tungstenite::client_async(format!("ws://127.0.0.1:{port}{path}"), tcp)
            .await
            .map_err(|e| format!("DevTools handshake: {e}"))?;
        Ok(Self { devtools, next_id: 1, _process: process, _proxy: proxy, network, profile })
    }

    /// Send one command (to a tab when `session` is given) and return its result.
    pub async fn call(&mut self, method: &str, params: Value, session: Option<&Tab>) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        let mut command = json!({ "id": id, "method": method, "params": params });
        if let Some(tab) = session {
            command["sessionId"] = json!(tab.session);
        }
        self.devtools.send(Message::text(command.to_string())).await.map_err(|e| format!("{method}: {e}"))?;
        let answer = tokio::time::timeout(COMMAND_TIMEOUT, async {
            while let Some(message) = self.devtools.next().await {
                let Ok(Message::Text(text)) = message else { continue };
                let Ok(value) = serde_json::from_str::<Value>(text.as_str()) else { continue };
                if value["id"] == json!(id) {
                    return Ok(value);
                }
            }
            Err(format!("{method}: the DevTools connection closed"))
        })
        .await
        .map_err(|_| format!("{method}: no answer in {COMMAND_TIMEOUT:?}"))??;
        match answer.get("error") {
            Some(error) => Err(format!("{method}: {error}")),
            None => Ok(answer["result"].clone()),
        }
    }

    /// A new tab at `about:blank`, in a browser context of its own (its own cookies and storage,
    /// like another person's browser).
    pub async fn new_tab(&mut self) -> Result<Tab, String> {
        let context = self.call("Target.createBrowserContext", json!({}), None).await?;
        let context = context["browserContextId"].as_str().ok_or("no browserContextId")?.to_owned();
        let params = json!({ "url": "about:blank", "browserContextId": context });
        let target = self.call("Target.createTarget", params, None).await?;
        let target = target["targetId"].as_str().ok_or("Target.createTarget gave no targetId")?.to_owned();
        let attached = self.call("Target.attachToTarget", json!({ "targetId": target, "flatten": true }), None).await?;
        let session = attached["sessionId"].as_str().ok_or("Target.attachToTarget gave no sessionId")?.to_owned();
        let tab = Tab { session };
        self.call("Page.enable", json!({}), Some(&tab)).await?;
        Ok(tab)
    }

    /// Load `url` in `tab` (returns once the navigation is committed; poll the page for more).
    pub async fn navigate(&mut self, tab: &Tab, url: &str) -> Result<(), String> {
        let answer = self.call("Page.navigate", json!({ "url": url }), Some(tab)).await?;
        match answer.get("errorText").and_then(Value::as_str) {
            Some(error) => Err(format!("navigating to {url}: {error}")),
            None => Ok(()),
        }
    }

    /// Reload `tab`.
    pub async fn reload(&mut self, tab: &Tab) -> Result<(), String> {
        self.call("Page.reload", json!({}), Some(tab)).await.map(drop)
    }

    /// The value of the JavaScript `expression` in `tab` (promises are awaited).
    pub async fn evaluate(&mut self, tab: &Tab, expression: &str) -> Result<Value, String> {
        let params = json!({ "expression": expression, "awaitPromise": true, "returnByValue": true });
        let answer = self.call("Runtime.evaluate", params, Some(tab)).await?;
        if let Some(exception) = answer.get("exceptionDetails") {
            return Err(format!("{expression}: {exception}"));
        }
        Ok(answer["result"]["value"].clone())
    }

    /// Type `text` into whatever has the focus in `tab`, as a user's keyboard would.
    pub async fn type_text(&mut self, tab: &Tab, text: &str) -> Result<(), String> {
        self.call("Input.insertText", json!({ "text": text }), Some(tab)).await.map(drop)
    }

    /// Press Enter in `tab`.
    pub async fn press_enter(&mut self, tab: &Tab) -> Result<(), String> {
        for kind in ["keyDown", "keyUp"] {
            let key =
                json!({ "type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r" });
            self.call("Input.dispatchKeyEvent", key, Some(tab)).await?;
        }
        Ok(())
    }

    /// A PNG of what `tab` shows, written to `path`.
    pub async fn screenshot(&mut self, tab: &Tab, path: &Path) -> Result<(), String> {
        let shot = self.call("Page.captureScreenshot", json!({ "format": "png" }), Some(tab)).await?;
        let data = shot["data"].as_str().ok_or("Page.captureScreenshot gave no data")?;
        let png = base64::engine::general_purpose::STANDARD.decode(data).map_err(|e| e.to_string())?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(path, png).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The pid (on the host) of the process holding the browser's network namespace.
    pub fn network_pid(&self) -> u32 {
        self.network.pid()
    }

    /// Chromium's own log so far, for failures.
    pub fn log(&self) -> String {
        myownshell_envtest::process::log_tail(&self.profile.path().join("chromium.log"), 30)
    }
}

/// The DevTools port and browser path Chromium writes to `DevToolsActivePort` in its profile
/// once it listens.
async fn devtools_address(profile: &Path, process: &ManagedProcess) -> Result<(u16, String), String> {
    let file = profile.join("DevToolsActivePort");
    let found = myownshell_envtest::eventually("Chromium's DevTools port", Duration::from_secs(30), || async {
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut lines = text.lines();
        let port = lines.next().and_then(|p| p.trim().parse::<u16>().ok()).ok_or("no port yet")?;
        let path = lines.next().filter(|p| p.starts_with('/')).ok_or("no browser path yet")?;
        Ok::<_, String>((port, path.to_owned()))
    })
    .await;
    found.map_err(|e| format!("{e}\n{}", process.log_tail(30)))
}
