//! `kubectl myownshell` (the `kubectl-myownshell` binary on `PATH`): list your shells, connect to
//! one, list its sessions, start, stop, extend or update them. Behaves like kubectl:
//! `-n/--namespace`, `--context`, `--kubeconfig`; errors go to stderr as `error: …` with exit code
//! 1; `connect` exits with the remote command's code. The modules are the library's (`lib.rs`).

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use myownshell_api::MyOwnShell;

use kubectl_myownshell::args::{Args, Command};
use kubectl_myownshell::client::Target;
use kubectl_myownshell::{classes, connect, lifecycle, ls, sessions};

fn main() -> ExitCode {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", message(&e));
            ExitCode::FAILURE
        }
    }
}

/// What to print for `e`: an API error once, as its message (kubectl's `Error from server`
/// line), after the context it was met in; anything else with its causes.
fn message(e: &anyhow::Error) -> String {
    let api = e.chain().find_map(|cause| match cause.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(status)) => Some(status.message.clone()),
        _ => None,
    });
    let Some(api) = api else { return format!("{e:#}") };
    // The contexts added on the way up, each once, then the apiserver's words.
    let contexts: Vec<String> =
        e.chain().take_while(|cause| cause.downcast_ref::<kube::Error>().is_none()).map(ToString::to_string).collect();
    contexts.into_iter().chain([api]).collect::<Vec<_>>().join(": ")
}

async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let target = Target::of(&args).await?;
    let shells: Api<MyOwnShell> = Api::namespaced(target.client.clone(), &target.namespace);
    match &args.command {
        Command::Ls { all_namespaces } => {
            let api = if *all_namespaces { Api::all(target.client.clone()) } else { shells };
            let mut list = api.list(&ListParams::default()).await?.items;
            list.sort_by(|a, b| {
                (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
            });
            let now = Timestamp::now();
            let rows: Vec<ls::Row> = list.iter().map(|s| ls::row(s, now)).collect();
            if rows.is_empty() {
                eprintln!("No shells found in {} namespace.", target.namespace);
            } else {
                print!("{}", ls::render(&rows, *all_namespaces));
            }
        }
        Command::Classes => {
            let rows = classes::usable(&target.client, &target.namespace).await.context("listing the shell classes")?;
            if rows.is_empty() {
                eprintln!("No shell class you may use in {} namespace.", target.namespace);
            } else {
                print!("{}", classes::render(&rows));
            }
        }
        Command::Connect(connect) => return connect::connect(&target, connect, args.namespace.as_deref()).await,
        Command::Sessions { name, output } => sessions::show(&target, name, *output).await?,
        Command::Start { name } => {
            lifecycle::apply_start(&shells, name).await?;
            println!("myownshell.myownshell.io/{name} started");
        }
        Command::Update { name } => {
            lifecycle::patch(&shells, name, &lifecycle::update_patch(Timestamp::now())).await?;
            println!("myownshell.myownshell.io/{name} update requested: its pods restart on the current pod template");
        }
        Command::Stop { name } => {
            lifecycle::patch(&shells, name, &lifecycle::stop_patch()).await?;
            println!("myownshell.myownshell.io/{name} stopped");
        }
        Command::Extend { name, duration } => {
            let shell = shells.get(name).await?;
            let by = duration.unwrap_or_else(|| lifecycle::default_extension(&shell));
            let (patch, until) = lifecycle::extend_patch(Timestamp::now(), by);
            lifecycle::patch(&shells, name, &patch).await?;
            println!(
                "myownshell.myownshell.io/{name} extended: no stop before {until} (in {})",
                myownshell_runtime::time::format_age(by.as_secs() as i64)
            );
        }
        Command::Approve { name, reason } => {
            let decision = myownshell_api::Decision::Approve;
            lifecycle::add_approval(&shells, name, decision, reason.as_deref()).await?;
            let shell = shells.get(name).await?;
            println!("myownshell.myownshell.io/{name} approved: {}", lifecycle::approval_words(&shell));
        }
        Command::Reject { name, reason } => {
            let decision = myownshell_api::Decision::Reject;
            lifecycle::add_approval(&shells, name, decision, reason.as_deref()).await?;
            println!("myownshell.myownshell.io/{name} rejected: it runs no pods until you take it back");
        }
    }
    Ok(ExitCode::SUCCESS)
}
