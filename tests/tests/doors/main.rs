//! The table of doors (`docs/doors.yaml`) against the real apiserver: every door in the code,
//! the policies and Kubernetes' own list has a row ([`coverage`]), and every row marked
//! `walked: api` is tried as each of its five people ([`probes`], in the world of [`world`]),
//! and gets what the row says. (The rows marked `walked: node` are walked by the e2e suite's
//! doors phase on the real node, and `walked: network` by `tests/tests/network_policy.rs` on a
//! node that enforces NetworkPolicies.)

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod coverage;
mod gateway;
mod probes;
mod world;

use std::collections::BTreeSet;
use std::time::Duration;

use myownshell_envtest::{eventually, shared};
use myownshell_tests::doors::{Cell, Person, table};

use crate::world::{Outcome, World};

#[test]
fn every_row_is_well_formed_and_kubernetes_own_doors_have_rows() {
    let doors = table().unwrap();
    let missing = coverage::without_rows(&doors, &BTreeSet::new());
    assert!(missing.is_empty(), "doors without a row in docs/doors.yaml:\n{}", missing.join("\n"));
}

/// Every subresource of pods and every proxy the apiserver serves is a row (a new Kubernetes
/// release that adds one fails here until it has its row).
#[tokio::test]
async fn every_subresource_of_pods_the_apiserver_serves_has_a_row() {
    let client = shared().client().unwrap();
    let resources = client.list_core_api_resources("v1").await.unwrap();
    let served: BTreeSet<String> = resources
        .resources
        .into_iter()
        .map(|r| r.name)
        .filter(|n| n.starts_with("pods/") || n.ends_with("/proxy"))
        .collect();
    assert!(served.contains("pods/exec") && served.contains("nodes/proxy"), "{served:?}");
    let missing = coverage::without_rows(&table().unwrap(), &served);
    assert!(missing.is_empty(), "doors without a row in docs/doors.yaml:\n{}", missing.join("\n"));
}

/// What `door` gives `person` is what its row says; the answer, or what was seen instead.
async fn as_the_row_says(w: &World, door: &str, person: Person, want: Cell) -> Result<String, String> {
    let got = probes::walk(w, door, person).await.ok_or_else(|| format!("door {door}: no probe tries it"))?;
    match (want, &got) {
        (Cell::Yes, Outcome::Through) => Ok("through".into()),
        (Cell::No, Outcome::Refused(why)) => Ok(format!("refused: {}", first_line(why))),
        _ => Err(format!("door {door} as the {}: the table says {want:?}, got {got:?}", person.column())),
    }
}

fn first_line(text: &str) -> &str {
    let line = text.lines().next().unwrap_or_default();
    &line[..line.len().min(160)]
}

#[tokio::test]
async fn every_door_is_walked_as_each_person_and_gives_what_its_row_says() {
    let w = World::start(shared()).await;
    let doors = table().unwrap();
    let mut wrong = Vec::new();
    let mut walked = 0;
    for door in doors.iter().filter(|d| d.walked == "api") {
        for person in Person::ALL {
            let want = door.cell(person).unwrap();
            if want == Cell::NotApplicable {
                continue;
            }
            // Policies and webhook configurations reach the apiserver through informers: a
            // refusal the table expects may take a moment to be in force.
            let what = format!("door {} as the {}", door.door, person.column());
            match eventually(&what, Duration::from_secs(20), || as_the_row_says(&w, &door.door, person, want)).await {
                Ok(seen) => {
                    walked += 1;
                    eprintln!("doors: {:<28} {:<9} {seen}", door.door, person.column());
                }
                Err(e) => wrong.push(e),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of the table's cells do not hold:\n{}\n--- webhook ---\n{}\n--- gateway ---\n{}",
        wrong.len(),
        wrong.join("\n"),
        w.webhook.log_tail(20),
        w.gateway.log_tail()
    );
    eprintln!("doors: {walked} cells walked, each as the table says");
}
