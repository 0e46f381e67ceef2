//! The doors phase: the rows of `docs/doors.yaml` marked `walked: node`, walked on the real
//! node as each of the table's five people, each cell read from the table (a row's cell is
//! what this phase expects; change the table and the walk follows, or fails saying which cell).
//!
//! - `gateway-reattach`: alice starts a held terminal through the gateway and types into it;
//!   each person opens the gateway's terminal socket with its id and either joins it (her
//!   screen, the session's id) or is refused without a byte of it.
//!
//! A row marked `walked: node` that this phase has no walk for fails the phase. (The `network`
//! row is walked where NetworkPolicies are enforced, by `tests/tests/network_policy.rs`.)

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use myownshell_envtest::eventually;
use myownshell_tests::doors::{Cell, Door, Person, table};
use myownshell_tests::gateway::GatewayClient;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

use super::{E2e, GATEWAY, SYSTEM, wait_running};

const SHELL: &str = "doors";
const STEP: Duration = Duration::from_secs(120);

/// The people, as the phase makes them: alice, bob and carol edit the shell's namespace (as
/// users of shells do), dave is authenticated with no role in it, and the pod runs in a
/// namespace of its own as its ServiceAccount `prober`.
struct People {
    ns: String,
    elsewhere: String,
    /// `--as` arguments per person (the pod's: its ServiceAccount).
    user: [String; 5],
    /// A token per person (the pod's: its ServiceAccount's, the one its pod is given).
    token: [String; 5],
}

impl People {
    fn index(person: Person) -> usize {
        Person::ALL.iter().position(|p| *p == person).unwrap_or_default()
    }

    fn user(&self, person: Person) -> &str {
        &self.user[Self::index(person)]
    }

    fn token(&self, person: Person) -> &str {
        &self.token[Self::index(person)]
    }
}

async fn people(e2e: &E2e) -> People {
    let ns = e2e.namespace("e2e-doors").await;
    let elsewhere = e2e.namespace("e2e-doors-elsewhere").await;
    let mut user = Vec::new();
    let mut token = Vec::new();
    for (who, home, editor) in [
        ("alice", &ns, true),
        ("bob", &ns, true),
        ("carol", &ns, true),
        ("dave", &ns, false),
        ("prober", &elsewhere, false),
    ] {
        e2e.run(&["create", "serviceaccount", who, "-n", home]).await;
        if editor {
            let subject = format!("--serviceaccount={home}:{who}");
            e2e.run(&["create", "rolebinding", &format!("{who}-edit"), "--clusterrole=edit", &subject, "-n", home])
                .await;
        }
        user.push(format!("system:serviceaccount:{home}:{who}"));
        token.push(e2e.run(&["create", "token", who, "-n", home]).await.trim().to_owned());
    }
    People { ns, elsewhere, user: user.try_into().expect("five people"), token: token.try_into().expect("five people") }
}

/// The phase.
pub async fn doors(e2e: &E2e) {
    let rows: Vec<Door> = table().unwrap().into_iter().filter(|d| d.walked == "node").collect();
    assert!(!rows.is_empty(), "docs/doors.yaml has no row walked on the node");
    let people = people(e2e).await;
    let manifest = format!(
        "apiVersion: myownshell.io/v1alpha1\nkind: MyOwnShell\nmetadata: {{name: {SHELL}}}\nspec: {{size: 1, sharedWith: {{users: [\"{}\"]}}}}\n",
        people.user(Person::Sharee)
    );
    let mut apply = vec![
        "--as",
        people.user(Person::Owner),
        "--as-group",
        "system:authenticated",
        "--as-group",
        "system:serviceaccounts",
    ];
    apply.extend(["apply", "-n", &people.ns, "-f", "-"]);
    let out = e2e.kubectl.run_with_stdin(&apply, Some(&manifest)).await.unwrap();
    assert!(out.success, "{}", out.stderr);
    wait_running(e2e, &people.ns, SHELL, 1).await;
    let mut walked = Vec::new();
    for door in &rows {
        let outcomes = match door.door.as_str() {
            "gateway-reattach" => gateway_reattach(e2e, &people, door).await,
            other => {
                panic!("docs/doors.yaml's row {other} is walked on the node, and the doors phase has no walk for it")
            }
        };
        walked.push(format!("{}: {}", door.door, outcomes.join(", ")));
    }
    eprintln!("e2e: doors walked on the node:\n  {}", walked.join("\n  "));
    for ns in [&people.ns, &people.elsewhere] {
        e2e.run(&["delete", "namespace", ns, "--wait=false"]).await;
    }
}

/// What a row says `person` gets, or a panic naming the cell.
fn expected(door: &Door, person: Person) -> Cell {
    door.cell(person).unwrap_or_else(|e| panic!("docs/doors.yaml, row {}: {e}", door.door))
}

/// `name: yes|no` per person tried.
fn outcome(person: Person, through: bool) -> String {
    format!("{} {}", person.column(), if through { "yes" } else { "no" })
}

/// The gateway at its Service's address, as a page's client (its certificate is self-signed).
async fn gateway(e2e: &E2e) -> GatewayClient {
    let ip = e2e.run(&["get", "svc", GATEWAY, "-n", SYSTEM, "-o", "jsonpath={.spec.clusterIP}"]).await;
    let addr: SocketAddr = format!("{}:443", ip.trim()).parse().unwrap();
    let tls = myownshell_tests::tls_client::tls_client(None).unwrap();
    GatewayClient { addr, tls: Arc::new(tls) }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

/// What a terminal socket said first: `attached` (its JSON) or why not, with the output seen.
async fn first_word(socket: &mut Socket, screen: &mut String) -> Result<Value, String> {
    loop {
        let next = tokio::time::timeout(STEP, socket.next()).await.map_err(|_| "no word in 120 s".to_owned())?;
        match next {
            Some(Ok(Message::Binary(bytes))) => screen.push_str(&String::from_utf8_lossy(&bytes)),
            Some(Ok(Message::Text(text))) => {
                let value: Value = serde_json::from_str(text.as_str()).map_err(|e| e.to_string())?;
                match value["type"].as_str() {
                    Some("attached") => return Ok(value),
                    Some("refused" | "closed" | "failed") => return Err(value.to_string()),
                    _ => {}
                }
            }
            Some(Ok(Message::Close(frame))) => return Err(format!("closed: {frame:?}")),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("ended".to_owned()),
        }
    }
}

/// Read output until it holds `mark`.
async fn read_until(socket: &mut Socket, screen: &mut String, mark: &str) -> Result<(), String> {
    while !screen.contains(mark) {
        let next = tokio::time::timeout(STEP, socket.next()).await.map_err(|_| format!("no {mark} in: {screen}"))?;
        match next {
            Some(Ok(Message::Binary(bytes))) => screen.push_str(&String::from_utf8_lossy(&bytes)),
            Some(Ok(_)) => {}
            other => return Err(format!("{other:?} before {mark}: {screen}")),
        }
    }
    Ok(())
}

/// A terminal socket as `token`'s page, with `query`; `Err` if the gateway refused the upgrade.
async fn open(gw: &GatewayClient, ns: &str, token: &str, query: &str) -> Result<Socket, String> {
    let (cookie, _) = gw.sign_in(token).await?;
    let origin = gw.origin();
    let path = format!("/api/terminal/{ns}/{SHELL}?cols=100&rows=30&{query}");
    gw.websocket(&path, &[("cookie", &cookie), ("origin", &origin)]).await
}

/// alice's held terminal, then each person with its id: joined (the session's id, her screen)
/// or refused with nothing of it.
async fn gateway_reattach(e2e: &E2e, people: &People, door: &Door) -> Vec<String> {
    let gw = gateway(e2e).await;
    let ns = &people.ns;
    let mut alices = eventually("alice's terminal through the gateway", STEP, || async {
        open(&gw, ns, people.token(Person::Owner), "new=1").await
    })
    .await
    .unwrap();
    let mut screen = String::new();
    let attached = first_word(&mut alices, &mut screen).await.unwrap();
    let session = attached["session"].as_str().unwrap_or_else(|| panic!("no session id: {attached}")).to_owned();
    // Typed in pieces, so that the echo of the command is not the mark.
    alices.send(Message::binary(b"echo alices-; echo secret\r".to_vec())).await.unwrap();
    read_until(&mut alices, &mut screen, "alices-\r\nsecret").await.unwrap();
    let mut outcomes = Vec::new();
    for person in Person::ALL {
        let want = expected(door, person);
        if want == Cell::NotApplicable {
            continue;
        }
        let mut seen = String::new();
        let got = match open(&gw, ns, people.token(person), &format!("session={session}&readOnly=1")).await {
            Ok(mut socket) => {
                let word = first_word(&mut socket, &mut seen).await;
                if word.is_ok() {
                    // Her screen is replayed to whoever joins.
                    read_until(&mut socket, &mut seen, "alices-\r\nsecret").await.unwrap_or_else(|e| {
                        panic!("gateway-reattach, {}: joined, without her screen: {e}", person.column())
                    });
                }
                let _ = socket.close(None).await;
                word
            }
            Err(e) => Err(e),
        };
        let through = match &got {
            Ok(hello) => {
                assert_eq!(hello["session"].as_str(), Some(session.as_str()), "{}: {hello}", person.column());
                true
            }
            Err(_) => {
                assert!(
                    !seen.contains("secret"),
                    "{} was refused after seeing alice's screen: {seen}",
                    person.column()
                );
                false
            }
        };
        assert_eq!(
            through,
            want == Cell::Yes,
            "gateway-reattach, {}: the table says {want:?}, the gateway said {got:?}",
            person.column()
        );
        outcomes.push(outcome(person, through));
    }
    let _ = alices.close(None).await;
    outcomes
}
