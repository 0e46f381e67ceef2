//! `kubectl myownshell connect NAME`: a terminal in a session the shell's holder keeps, reached
//! straight in the pod (this plugin's own exec, `direct`) or through the gateway (`gateway`),
//! the same client logic either way (`attach`). A pod without a holder (one started before it)
//! gets today's plain `kubectl exec`, said in one line. Exits with the session's command's code,
//! 0 after a detach, 1 when the session ends otherwise or cannot be reached.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use kube::Api;
use myownshell_api::MyOwnShell;

use crate::args::ConnectArgs;
use crate::attach::local::{self, Raw};
use crate::attach::{Ending, Joined, Link, NO_HOLDER, Options, Request, Transport, farewell};
use crate::client::{Target, kubectl};
use crate::direct::Direct;
use crate::gateway::Gateway;
use crate::{lifecycle, pod, whoami};

/// Connect as `args` say; `namespace`: the one given on the command line, if any (for the way
/// back to a session).
pub async fn connect(target: &Target, args: &ConnectArgs, namespace: Option<&str>) -> anyhow::Result<ExitCode> {
    let screen = local::is_screen();
    let mut come_back = format!("kubectl myownshell connect {}", args.name);
    if let Some(namespace) = namespace {
        come_back.push_str(&format!(" -n {namespace}"));
    }
    let options = Options {
        shell: args.name.clone(),
        come_back,
        detach_keys: if screen { args.detach_keys.0.clone() } else { Vec::new() },
        grace: args.reconnect_grace,
        screen,
    };
    let request = Request { which: args.which(), read_only: args.read_only, size: local::window() };
    match args.gateway.clone().filter(|_| !args.direct && args.command.is_empty()) {
        Some(url) => through_gateway(target, args, url, request, &options).await,
        None => direct(target, args, request, &options).await,
    }
}

/// Straight to the pod: wait for a ready one, name the user, attach through its holder.
async fn direct(target: &Target, args: &ConnectArgs, request: Request, options: &Options) -> anyhow::Result<ExitCode> {
    let pod = pod::ready(target, &args.name, args.timeout, args.start).await?;
    let user = whoami::user_name(&target.client).await?;
    let pods = Api::namespaced(target.exec_client.clone(), &target.namespace);
    let mut transport = Direct { pods, pod: pod.clone(), user };
    match crate::attach::open(&mut transport, &request).await {
        Ok(first) => session(&mut transport, first, request, options).await,
        Err(Ending::NoHolder(_)) => {
            eprintln!("{NO_HOLDER}");
            exec(target, &pod, &args.command)
        }
        Err(ending) => Ok(leave(&ending, options)),
    }
}

/// Through the gateway, with the user's bearer token.
async fn through_gateway(
    target: &Target,
    args: &ConnectArgs,
    url: String,
    request: Request,
    options: &Options,
) -> anyhow::Result<ExitCode> {
    let token = crate::credential::bearer_token(&target.auth)?.context(
        "connecting through the gateway needs a bearer token (--token, or a kubeconfig user with a token, a \
         tokenFile, an exec plugin such as kubelogin, or an oidc auth provider); --direct connects straight to the \
         pod instead",
    )?;
    let shells: Api<MyOwnShell> = Api::namespaced(target.client.clone(), &target.namespace);
    if args.start && shells.get(&args.name).await?.status.is_some_and(|s| s.stopped.is_some()) {
        lifecycle::apply_start(&shells, &args.name).await?;
    }
    let mut transport = Gateway {
        url,
        certificate_authority: args.gateway_certificate_authority.clone(),
        namespace: target.namespace.clone(),
        shell: args.name.clone(),
        token,
        progress: match options.screen {
            true => Arc::new(|line: &str| eprint!("{line}\r\n")),
            false => Arc::new(|line: &str| eprintln!("{line}")),
        },
    };
    match crate::attach::open(&mut transport, &request).await {
        Ok(first) => session(&mut transport, first, request, options).await,
        Err(ending) => Ok(leave(&ending, options)),
    }
}

/// Joined: the terminal raw (at a screen) until the end, then the last word and the code.
async fn session<T: Transport>(
    transport: &mut T,
    first: (Link, Joined),
    request: Request,
    options: &Options,
) -> anyhow::Result<ExitCode> {
    let mut terminal = local::terminal(options.screen).context("watching the terminal")?;
    let raw = options.screen.then(Raw::enter);
    let ending = crate::attach::run(transport, first, request, options, &mut terminal).await;
    drop(raw);
    Ok(leave(&ending, options))
}

/// Say the ending's line; its exit code.
fn leave(ending: &Ending, options: &Options) -> ExitCode {
    let (line, code) = farewell(ending, options);
    if let Some(line) = line {
        eprintln!("{line}");
    }
    ExitCode::from(code)
}

/// A pod without a holder: `kubectl exec -i[t] POD -c shell -- COMMAND` (default `sh`), on this
/// terminal; the exit code is the command's.
fn exec(target: &Target, pod: &str, command: &[String]) -> anyhow::Result<ExitCode> {
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let mut cmd = std::process::Command::new(kubectl());
    cmd.args(&target.kubectl_flags).args(["--namespace", &target.namespace, "exec"]);
    cmd.arg(if tty { "-it" } else { "-i" }).args([pod, "-c", crate::direct::CONTAINER, "--"]);
    match command {
        [] => cmd.arg("sh"),
        _ => cmd.args(command),
    };
    let status = cmd.status().with_context(|| format!("running {}", kubectl().display()))?;
    Ok(ExitCode::from(status.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(1)))
}
