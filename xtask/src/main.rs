//! Project tasks: `cargo xtask <command>` (the alias lives in `.cargo/config.toml`).

mod bench;
mod bench_gate;
mod bench_gateway;
mod bench_node;
mod bench_sessions;
mod bench_signin;
mod cargo;
mod certmanager;
mod crdgen;
mod dev;
mod docs;
mod doors;
mod e2e;
mod envtest;
mod go;
mod helm;
mod hydra;
mod kube_router;
mod kwok;
mod local_path;
mod machine_cpu;
mod machine_speed;
mod node;
mod oauth2_proxy;
mod previous;
mod progress;
mod prometheus;
mod readme;
mod session;
mod test;
mod web;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "MyOwnShell project tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write the CRD generated from `api/` to `config/crd/` (or, with --check, fail on drift).
    Crdgen {
        /// Compare instead of writing; exit non-zero with a diff when the files are stale.
        #[arg(long)]
        check: bool,
    },
    /// Regenerate the README's flag reference from the binaries' --help (or check it).
    Docs {
        /// Fail instead of writing when the README is stale.
        #[arg(long)]
        check: bool,
    },
    /// Write the Helm chart `dist/chart` generated from `config/` (or, with --check, fail on drift).
    Chart {
        /// Compare instead of writing; exit non-zero with a diff when the chart is stale.
        #[arg(long)]
        check: bool,
        /// Then make sure helm is built (once, from the Go module proxy) and print its path as
        /// the last line (for MYOWNSHELL_HELM).
        #[arg(long)]
        helm: bool,
    },
    /// Make sure kube-apiserver and etcd exist (building kube-apiserver once if needed) and
    /// print, as the last line, the directory that holds them (for KUBEBUILDER_ASSETS).
    Envtest {
        /// Also everything a real node needs (root): kubelet, kube-controller-manager,
        /// kube-scheduler and kube-proxy built once; containerd, runc, CNI plugins and the
        /// other Debian packages installed when missing; the pause and shell images built; and
        /// kube-router, the NetworkPolicy enforcer, built once.
        #[arg(long)]
        node: bool,
    },
    /// Make sure a kwok cluster can run: kwok (built once from the Go module proxy) with its
    /// configuration, kube-controller-manager and kube-scheduler; print, as the last line, the
    /// directory holding kwok (for MYOWNSHELL_KWOK).
    Kwok,
    /// Make sure the OIDC test bed's provider is there: Ory Hydra, built once from the Go module
    /// proxy; print, as the last line, the directory holding it (for MYOWNSHELL_HYDRA).
    Hydra,
    /// Make sure oauth2-proxy, which the e2e puts in front of the gateway, is there: built once
    /// from the Go module proxy; print, as the last line, the directory holding it (for
    /// MYOWNSHELL_OAUTH2_PROXY).
    Oauth2Proxy,
    /// Install the gateway page's JavaScript (xterm.js, from npm as gateway/web/package-lock.json
    /// pins it) once into ~/.cache/myownshell/web/, and print its node_modules directory (for
    /// MYOWNSHELL_GATEWAY_ASSETS and the gateway's --assets-dir).
    Web,
    /// Benchmarks (release build): figures and a ratio against a floor measured in the same run.
    Bench {
        #[command(subcommand)]
        target: bench::Target,
    },
    /// Run the operator locally: its own control plane, the webhook, the controller and the gateway as real
    /// processes; writes target/dev/env when ready; Ctrl-C stops everything.
    Dev(dev::DevArgs),
    /// The suites on a real node (root): the node itself, and the operator deployed from
    /// config/ onto it. Installs and builds what the node needs first (see `envtest --node`).
    E2e {
        /// Extra arguments for `cargo test` (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        cargo_test_args: Vec<String>,
    },
    /// Everything CI runs: envtest binaries, crdgen --check, fmt, clippy, all tests (the node
    /// suites too, whenever the node can run; always with CI=true).
    Test {
        /// Extra arguments for `cargo test` (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        cargo_test_args: Vec<String>,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crdgen { check } => crdgen::run(check),
        Command::Docs { check } => docs::run(check),
        Command::Chart { check, helm } => helm::run_chart(check, helm),
        Command::Envtest { node } => envtest::ensure().and_then(|dir| {
            if node {
                let images = node::ensure()?;
                let kube_router = kube_router::ensure()?;
                eprintln!(
                    "xtask: node ready: binaries in {}, images in {}, kube-router in {}",
                    dir.display(),
                    images.display(),
                    kube_router.display()
                );
            }
            println!("{}", dir.display());
            Ok(())
        }),
        Command::Kwok => kwok::ensure().map(|dir| println!("{}", dir.display())),
        Command::Hydra => hydra::ensure().map(|dir| println!("{}", dir.display())),
        Command::Oauth2Proxy => oauth2_proxy::ensure().map(|dir| println!("{}", dir.display())),
        Command::Web => web::run(),
        Command::Dev(args) => dev::run(args),
        Command::Bench { target } => bench::run(target),
        Command::E2e { cargo_test_args } => e2e::run(&cargo_test_args),
        Command::Test { cargo_test_args } => test::run(&cargo_test_args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
