//! `cargo xtask bench <target>`: benchmarks that print figures (never timed tests). Each target
//! lives in its own module (`bench_<target>.rs`) and compares against a floor measured in the
//! same run, so the ratio means something on any machine.

use anyhow::{Context, bail};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum Target {
    /// Admission requests over TLS keep-alive against the webhook and against a minimal
    /// rustls+hyper fixed-body server, at concurrency 1, 8 and 32 (`webhook/benches/webhook.rs`).
    Webhook {
        /// Seconds measured per server, round and concurrency.
        #[arg(long, default_value_t = 1)]
        seconds: u64,
        /// Concurrency levels, comma-separated.
        #[arg(long, default_value = "1,8,32")]
        concurrency: String,
        /// Paired rounds per level; the ratio is the median of the rounds' ratios.
        #[arg(long, default_value_t = 5)]
        rounds: u32,
        /// Fresh processes to repeat it all in; the summary is the median over them.
        #[arg(long, default_value_t = 3)]
        processes: u32,
    },
    /// N MyOwnShells through the real controller binary to Deployments and statuses, against
    /// creating the same N Deployments directly and against a plain client making the same
    /// requests; both ratios, each write's cost, the controller's RSS (peak, steady, per
    /// object), churn at fixed rates against the queue-latency and reconcile SLOs, the writes
    /// after a controller restart and after an apiserver restart, and how late lifetime stops
    /// fire; every shell's pod exists, on kwok's fake nodes (`controller/benches/controller/`).
    Controller {
        /// Objects per run.
        #[arg(long, default_value_t = 1000)]
        objects: usize,
        /// Client concurrency, and the controller's `--concurrency` (its default).
        #[arg(long, default_value_t = 128)]
        concurrency: usize,
        /// Seconds of each churn phase (0: no churn).
        #[arg(long, default_value_t = 60)]
        churn_seconds: u64,
        /// Updates per second to random objects, one churn phase per rate, comma-separated.
        #[arg(long, default_value = "100,400")]
        churn_rates: String,
        /// Shells whose stop is timed at the end (given a run time ending 20 s later); 0: none.
        #[arg(long, default_value_t = 2000)]
        stops: usize,
        /// Stops due per second in that phase (20: about the rate this cluster starts shells
        /// at, which stops of one `maxRunTime` cannot outpace; see the bench's `STOP_RATE`).
        #[arg(long, default_value_t = 20)]
        stop_rate: u32,
        /// Every shell with a home (its claim bound by the bench, playing the volume provisioner).
        #[arg(long)]
        homes: bool,
        /// Only the controller's phase (its convergence, RSS and writes), no floors and so no
        /// ratios: for sizes whose floors take longer than the machine has. Needs
        /// `--churn-seconds 0 --stops 0`.
        #[arg(long)]
        no_floors: bool,
        /// Run the controller under heaptrack: one profile per controller process, PATH.first.zst
        /// and PATH.restarted.zst (the RSS figures are then heaptrack's).
        #[arg(long)]
        heap_profile: Option<std::path::PathBuf>,
    },
    /// On the real node (root): the time from creating a MyOwnShell to its pod Running, against
    /// creating the same Deployment directly (`xtask/src/bench_node.rs`).
    Node {
        /// Measured rounds (each: one Deployment, one MyOwnShell).
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// What the connect gate (the webhook, called by the apiserver) adds to an exec into a
    /// shell's pod with 1 to 10,000 shells in its namespace, against a pod that is no shell's
    /// and against a namespace not opened to shells (`xtask/src/bench_gate.rs`).
    Gate {
        /// Shells in the namespace, one measurement each, comma-separated (ascending).
        #[arg(long, default_value = "1,100,1000,10000")]
        shells: String,
        /// Execs measured per pod and count (a p99 needs a few hundred).
        #[arg(long, default_value_t = 400)]
        requests: usize,
    },
    /// On the real node (root): a terminal through the gateway against a direct WebSocket exec
    /// into the same pod: keystroke-to-echo p50/p99, throughput, and the gateway's memory with
    /// `--sessions` idle terminals open, every one echoing a key (`xtask/src/bench_gateway.rs`).
    Gateway {
        /// Keystrokes timed per path.
        #[arg(long, default_value_t = 2000)]
        keystrokes: usize,
        /// Bytes printed per path for the throughput.
        #[arg(long, default_value_t = 100_000_000)]
        bytes: usize,
        /// Idle terminals held open at once.
        #[arg(long, default_value_t = 1000)]
        sessions: usize,
    },
    /// On the real node (root): terminals held by the session holder against plain ones, both
    /// through the gateway: keystroke to echo, output (long and short lines), the holder's
    /// memory per session, and a rollout of the gateway's two replicas with `--terminals` open
    /// (`xtask/src/bench_sessions.rs`).
    Sessions {
        /// Keystrokes timed per path.
        #[arg(long, default_value_t = 2000)]
        keystrokes: usize,
        /// Bytes printed as one line per path.
        #[arg(long, default_value_t = 20_000_000)]
        long_bytes: usize,
        /// Bytes of short lines (`yes`, two bytes a line), against one line of as many.
        #[arg(long, default_value_t = 2_000_000)]
        short_bytes: usize,
        /// Rounds of the output measurements; the median is printed.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Sessions open in one holder for its memory per session.
        #[arg(long, default_value_t = 100)]
        sessions: usize,
        /// Terminals open on the gateway's two replicas (half each) when they are rolled out.
        #[arg(long, default_value_t = 500)]
        terminals: usize,
        /// Holder pods the terminals are in: the first holds `--sessions` (with one pod, all
        /// of them, its memory measured again at that many), the others share the rest.
        #[arg(long, default_value_t = 1)]
        pods: usize,
    },
    /// The gateway's sign-in through the test bed's identity provider (Ory Hydra): the round
    /// trip from the page's link through the provider and back to a terminal's first message,
    /// p50/p99, against the same flow and exec without the gateway; and an ID token's
    /// verification with cached keys against the bare signature check (`xtask/src/bench_signin.rs`).
    Signin {
        /// Sign-ins measured per path.
        #[arg(long, default_value_t = 200)]
        sign_ins: usize,
        /// Verifications per round (7 rounds) of the verification bench.
        #[arg(long, default_value_t = 20_000)]
        verifications: usize,
    },
    /// Authenticated GETs of a fixed metrics body with warm caches through the standalone
    /// rbac-proxy vs straight to its upstream: req/s, p50, p99, ratio (`rbac-proxy/benches/proxy.rs`).
    Proxy {
        /// Seconds measured per target.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Concurrent keep-alive connections.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// Size of the metrics body in bytes.
        #[arg(long, default_value_t = 16384)]
        body_bytes: usize,
        /// The proxy's `--worker-threads` (the null proxy gets as many).
        #[arg(long, default_value_t = 1)]
        proxy_worker_threads: u16,
    },
}

pub fn run(target: Target) -> anyhow::Result<()> {
    match target {
        Target::Gateway { keystrokes, bytes, sessions } => {
            crate::bench_gateway::run(crate::bench_gateway::Options { keystrokes, bytes, sessions })
        }
        Target::Sessions { keystrokes, long_bytes, short_bytes, rounds, sessions, terminals, pods } => {
            crate::bench_sessions::run(crate::bench_sessions::Options {
                keystrokes,
                long_bytes,
                short_bytes,
                rounds,
                sessions,
                terminals,
                pods,
            })
        }
        Target::Webhook { seconds, concurrency, rounds, processes } => {
            // The class row asks a real kube-apiserver for its SubjectAccessReviews.
            let assets = crate::envtest::ensure()?;
            let status = crate::cargo::cargo()
                .env("KUBEBUILDER_ASSETS", &assets)
                .args(["bench", "--package", "myownshell-webhook", "--bench", "webhook", "--"])
                .args([
                    "--seconds",
                    &seconds.to_string(),
                    "--concurrency",
                    &concurrency,
                    "--rounds",
                    &rounds.to_string(),
                    "--processes",
                    &processes.to_string(),
                ])
                .status()?;
            if !status.success() {
                bail!("the webhook bench failed ({status})");
            }
            Ok(())
        }
        Target::Controller {
            objects,
            concurrency,
            churn_seconds,
            churn_rates,
            stops,
            stop_rate,
            homes,
            no_floors,
            heap_profile,
        } => {
            // The bench's cluster: the control plane's binaries and kwok's fake nodes.
            let assets = crate::envtest::ensure()?;
            let kwok = crate::kwok::ensure()?;
            let mut command = crate::cargo::cargo();
            command.env("KUBEBUILDER_ASSETS", &assets).env("MYOWNSHELL_KWOK", &kwok);
            command.args(["bench", "--package", "myownshell-controller", "--bench", "controller"]);
            // heaptrack sees only the C library's malloc, not the shipped binary's jemalloc.
            if heap_profile.is_some() {
                command.arg("--no-default-features");
            }
            command
                .arg("--")
                .args(["--objects", &objects.to_string(), "--concurrency", &concurrency.to_string()])
                .args(["--churn-seconds", &churn_seconds.to_string(), "--churn-rates", &churn_rates])
                .args(["--stops", &stops.to_string(), "--stop-rate", &stop_rate.to_string()]);
            if homes {
                command.arg("--homes");
            }
            if no_floors {
                command.arg("--no-floors");
            }
            if let Some(path) = heap_profile {
                command.arg("--heap-profile").arg(path);
            }
            let status = command.status()?;
            if !status.success() {
                anyhow::bail!("the controller bench failed ({status})");
            }
            Ok(())
        }
        Target::Node { rounds } => crate::bench_node::run(rounds.max(1)),
        Target::Signin { sign_ins, verifications } => {
            crate::bench_signin::run(crate::bench_signin::Options { sign_ins, verifications })
        }
        Target::Gate { shells, requests } => {
            let counts = shells
                .split(',')
                .map(|c| c.trim().parse::<usize>().with_context(|| format!("--shells: {c:?} is not a count")))
                .collect::<anyhow::Result<Vec<_>>>()?;
            if counts.is_empty() || counts.contains(&0) || counts.windows(2).any(|w| w[0] > w[1]) {
                bail!("--shells: ascending counts of at least 1, got {shells}");
            }
            crate::bench_gate::run(&counts, requests)
        }
        Target::Proxy { seconds, concurrency, body_bytes, proxy_worker_threads } => {
            let status = crate::cargo::cargo()
                .args(["bench", "--package", "myownshell-rbac-proxy", "--bench", "proxy", "--"])
                .args(["--seconds", &seconds.to_string(), "--concurrency", &concurrency.to_string()])
                .args(["--body-bytes", &body_bytes.to_string()])
                .args(["--proxy-worker-threads", &proxy_worker_threads.to_string()])
                .status()?;
            if !status.success() {
                anyhow::bail!("the proxy bench failed ({status})");
            }
            Ok(())
        }
    }
}
