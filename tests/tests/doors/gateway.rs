//! The gateway's doors, tried as each person with their own token (signed in from the page as a
//! browser would), and the webhook's review paths, posted to as anyone on the network would.

use futures::StreamExt;
use http::Method;
use myownshell_tests::doors::Person;
use myownshell_tests::gateway::session_cookie;
use myownshell_tests::tls_client::HttpsConnection;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::world::{Outcome, POD, SHELL, World};

/// Sign `person` in from the page: their cookie and CSRF token, or why not.
async fn sign_in(w: &World, person: Person) -> Result<(String, String), Outcome> {
    let origin = w.gateway.origin();
    let token = w.token(person).await;
    let answer =
        w.gateway.request(Method::POST, "/api/session", &[("origin", &origin)], Some(json!({ "token": token }))).await;
    let (status, headers, body) = answer.map_err(Outcome::Refused)?;
    if status != 200 {
        return Err(Outcome::Refused(format!("{status}: {body}")));
    }
    let csrf = serde_json::from_str::<Value>(&body).ok().and_then(|v| v["csrf"].as_str().map(str::to_owned));
    Ok((session_cookie(&headers).unwrap_or_default(), csrf.unwrap_or_default()))
}

/// Through for a 2xx answer, refused otherwise.
fn by_status(status: u16, body: &str) -> Outcome {
    if (200..300).contains(&status) { Outcome::Through } else { Outcome::Refused(format!("{status}: {body}")) }
}

/// The messages of a terminal's socket until it closes (or the 10th).
async fn terminal(w: &World, cookie: &str) -> Result<Vec<Value>, String> {
    let origin = w.gateway.origin();
    let path = format!("/api/terminal/{}/{SHELL}?cols=80&rows=24", w.ns);
    let mut socket = w.gateway.websocket(&path, &[("cookie", cookie), ("origin", &origin)]).await?;
    let mut messages = Vec::new();
    while let Ok(Some(Ok(message))) = tokio::time::timeout(std::time::Duration::from_secs(30), socket.next()).await {
        match message {
            Message::Text(text) => messages.push(serde_json::from_str(text.as_str()).map_err(|e| e.to_string())?),
            Message::Close(_) => break,
            _ => {}
        }
        if messages.len() >= 10 {
            break;
        }
    }
    Ok(messages)
}

/// Whether a terminal's messages show an exec the gate let through: attached, or ended at the
/// apiserver for want of a node (no pod runs on this plane), never refused by the gate or RBAC.
fn admitted(messages: &[Value]) -> Outcome {
    let through = messages.iter().any(|m| {
        m["type"] == "attached"
            || (m["type"] == "refused"
                && ["does not have a host assigned", "error dialing backend"]
                    .iter()
                    .any(|w| m["message"].as_str().unwrap_or_default().contains(w)))
    });
    if through { Outcome::Through } else { Outcome::Refused(format!("{messages:?}")) }
}

/// `door` of the gateway tried as `person`.
pub async fn walk(w: &World, door: &str, person: Person) -> Option<Outcome> {
    let signed_in = match door {
        "gateway-page" => {
            let (status, _, body) = w.gateway.request(Method::GET, "/", &[], None).await.unwrap_or_default();
            return Some(by_status(status, &body));
        }
        "gateway-sign-in" | "gateway-shells" | "gateway-terminal" | "gateway-extend" | "gateway-approve"
        | "gateway-recordings" | "gateway-sessions" | "gateway-create" | "gateway-stop-start" | "gateway-delete" => {
            sign_in(w, person).await
        }
        _ => return None,
    };
    let (cookie, csrf) = match signed_in {
        Ok(signed_in) => signed_in,
        Err(refused) => return Some(refused),
    };
    let origin = w.gateway.origin();
    let get = |path: String| {
        let cookie = cookie.clone();
        async move {
            let (status, _, body) =
                w.gateway.request(Method::GET, &path, &[("cookie", &cookie)], None).await.unwrap_or_default();
            by_status(status, &body)
        }
    };
    Some(match door {
        "gateway-sign-in" => Outcome::Through,
        "gateway-shells" => get(format!("/api/shells?namespace={}", w.ns)).await,
        "gateway-sessions" => {
            let path = format!("/api/sessions/{}/{SHELL}", w.ns);
            let (status, _, body) =
                w.gateway.request(Method::GET, &path, &[("cookie", &cookie)], None).await.unwrap_or_default();
            // Through the gate, the exec then ends at the apiserver for want of a node.
            if status == 502 && body.contains("host assigned") { Outcome::Through } else { by_status(status, &body) }
        }
        "gateway-terminal" => match terminal(w, &cookie).await {
            Ok(messages) => admitted(&messages),
            Err(refused) => Outcome::Refused(refused),
        },
        "gateway-extend" | "gateway-approve" => {
            let action = door.trim_start_matches("gateway-");
            let path = format!("/api/shells/{}/{SHELL}/{action}", w.ns);
            let headers = [("cookie", cookie.as_str()), ("origin", origin.as_str()), ("x-csrf-token", csrf.as_str())];
            let (status, _, body) = w.gateway.request(Method::POST, &path, &headers, None).await.unwrap_or_default();
            by_status(status, &body)
        }
        // Dry runs (as `--dry-run=server`): every layer decides, the shell stays as it is.
        "gateway-create" | "gateway-stop-start" | "gateway-delete" => {
            let headers = [("cookie", cookie.as_str()), ("origin", origin.as_str()), ("x-csrf-token", csrf.as_str())];
            let shell = format!("/api/shells/{}/{SHELL}", w.ns);
            let (method, paths, body) = match door {
                "gateway-create" => {
                    let new = json!({ "name": format!("door-{}", person.column()) });
                    (Method::POST, vec![format!("/api/shells/{}", w.ns)], Some(new))
                }
                "gateway-stop-start" => (Method::POST, vec![format!("{shell}/stop"), format!("{shell}/start")], None),
                _ => (Method::DELETE, vec![shell], None),
            };
            let mut outcome = Outcome::Through;
            for path in paths {
                let path = format!("{path}?dryRun=All");
                let (status, _, text) =
                    w.gateway.request(method.clone(), &path, &headers, body.clone()).await.unwrap_or_default();
                if let Outcome::Refused(why) = by_status(status, &text) {
                    outcome = Outcome::Refused(why);
                }
            }
            outcome
        }
        "gateway-recordings" => match get(format!("/api/recordings/{}/{SHELL}", w.ns)).await {
            Outcome::Through => Outcome::Through,
            Outcome::Refused(_) => {
                get(format!("/api/recordings/{}/{SHELL}/20261129T000000Z-0123abcd.cast", w.ns)).await
            }
        },
        _ => return None,
    })
}

/// A review posted to the webhook's `path` as a pod on the network would (no client
/// certificate): "alice connected" for the connect path, a shell for the others.
pub async fn forged_review(w: &World, path: &str) -> Outcome {
    let request = json!({
        "uid": "5e2b7f0e-0000-4000-8000-000000000003",
        "kind": {"group": "", "version": "v1", "kind": "PodExecOptions"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "exec", "name": POD, "namespace": w.ns, "operation": "CONNECT",
        "userInfo": {"username": w.user(Person::Owner), "groups": ["system:authenticated"]},
        "object": {"apiVersion": "v1", "kind": "PodExecOptions", "command": ["sh"]},
    });
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    let mut connection = match HttpsConnection::connect(w.webhook.addr(), None, "localhost").await {
        Ok(connection) => connection,
        Err(e) => return Outcome::Refused(e),
    };
    match connection.post(path, review.to_string().into_bytes()).await {
        Ok((status, body)) => by_status(status, &String::from_utf8_lossy(&body)),
        Err(e) => Outcome::Refused(e),
    }
}
