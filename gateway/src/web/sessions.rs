//! `GET /api/sessions/{namespace}/{shell}`: the shell's terminals its holder keeps, as the page
//! offers them: the caller's own and, when the shell is shared with them, its owner's (to join,
//! read-only or driving as the owner allows). Listed by `myownshell-session list --json`, run in
//! the shell's ready pod as the caller: the connect gate decides, as for a terminal.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use myownshell_session::protocol::{MAX_LISTING, SessionInfo};
use serde_json::json;

use super::api::{Peer, peer, refused};
use crate::exec::run::{RunError, output};
use crate::exec::target::{TargetError, find};
use crate::gateway::Gateway;
use crate::signin::{self, Purpose, Refusal};
use crate::terminal::held::may_attach;

/// The list: sessions `user` may attach to, of a shell owned by `owner`.
pub fn offered(sessions: Vec<SessionInfo>, user: &str, owner: Option<&str>) -> Vec<SessionInfo> {
    sessions.into_iter().filter(|s| may_attach(&s.user, user, owner)).collect()
}

/// The handler.
pub async fn list(
    State(gw): State<Arc<Gateway>>,
    Path((namespace, shell)): Path<(String, String)>,
    info: Peer,
    headers: HeaderMap,
) -> Response {
    let caller = match signin::caller(&gw.gate(), &headers, peer(&info), Purpose::Read).await {
        Ok(caller) => caller,
        Err(refusal) => return refused(refusal),
    };
    let as_user = match gw.as_user(&caller.user) {
        Ok(as_user) => as_user,
        Err(e) => return refused(Refusal { status: StatusCode::FORBIDDEN, message: e.to_string() }),
    };
    let (waiting, _) = tokio::sync::mpsc::unbounded_channel();
    let found = match find(&as_user, &namespace, &shell, Duration::ZERO, waiting).await {
        Ok(found) => found,
        // Stopped, or no ready pod: no terminal runs.
        Err(TargetError::Stopped(_) | TargetError::Timeout(..)) => {
            return Json(json!({ "sessions": [] })).into_response();
        }
        Err(TargetError::Api(why)) => return refused(Refusal { status: StatusCode::FORBIDDEN, message: why }),
        Err(TargetError::Unavailable(why)) => {
            return refused(Refusal { status: StatusCode::SERVICE_UNAVAILABLE, message: why });
        }
    };
    let place = (namespace.as_str(), found.pod.as_str(), "shell");
    match output(&as_user, place, myownshell_session::exec::list(), MAX_LISTING).await {
        Ok(bytes) => match serde_json::from_slice::<Vec<SessionInfo>>(&bytes) {
            Ok(all) => {
                let sessions = offered(all, &caller.user.name, found.owner.as_deref());
                Json(json!({ "sessions": sessions, "pod": found.pod, "owner": found.owner })).into_response()
            }
            Err(e) => refused(Refusal { status: StatusCode::BAD_GATEWAY, message: format!("the session list: {e}") }),
        },
        // The apiserver's own code: a refusal (401, 403) is one, an exec that could not reach its
        // pod (no node, a kubelet that does not answer) is the gateway's bad gateway.
        Err(RunError::Refused(code, why)) if code == StatusCode::FORBIDDEN || code == StatusCode::UNAUTHORIZED => {
            refused(Refusal { status: code, message: why })
        }
        Err(RunError::Refused(_, why) | RunError::Failed(why)) => {
            refused(Refusal { status: StatusCode::BAD_GATEWAY, message: why })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, user: &str) -> SessionInfo {
        serde_json::from_value(json!({"id": id, "user": user, "created": 1, "attached": [], "command": ["/bin/sh"], "pid": 2, "allowDrive": false}))
            .expect("a session")
    }

    #[test]
    fn a_user_is_offered_their_own_sessions_and_the_owners() {
        let all = vec![session("a", "alice"), session("b", "bob"), session("c", "carol")];
        let ids = |v: Vec<SessionInfo>| v.into_iter().map(|s| s.id).collect::<Vec<_>>();
        assert_eq!(ids(offered(all.clone(), "bob", Some("alice"))), ["a", "b"]);
        assert_eq!(ids(offered(all.clone(), "alice", Some("alice"))), ["a"]);
        assert_eq!(ids(offered(all, "dave", None)), Vec::<String>::new());
    }
}
