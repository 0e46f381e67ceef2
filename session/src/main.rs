//! `myownshell-session`: `serve` (the holder, pid 1 of a shell's container), `attach`, `list`,
//! `kill`, `install`. One thread: the holder's work is a few PTYs and sockets, and a
//! current-thread runtime keeps the static binary small and its pid 1 simple.

use std::process::ExitCode;

use clap::Parser;

mod args;
mod client;
mod duration;
mod holder;
mod install;
mod log;
mod procs;

use args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Install(args) => install::install(&args.dest).map(|()| 0),
        command => match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime.block_on(run(command)),
            Err(e) => Err(format!("starting the runtime: {e}")),
        },
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1)),
        Err(error) => {
            log::line(&error);
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> Result<i32, String> {
    match command {
        Command::Serve(args) => holder::serve::serve(serve(args)).await,
        Command::Attach(args) if args.framed => client::framed::run(&args).await,
        Command::Attach(args) => client::interactive::run(&args).await,
        Command::List(args) => client::admin::list(&args.socket_dir, args.json).await,
        Command::Kill(args) => client::admin::kill(&args.socket_dir, &args.id).await,
        Command::Install(args) => install::install(&args.dest).map(|()| 0),
    }
}

fn serve(args: args::ServeArgs) -> holder::serve::Serve {
    holder::serve::Serve {
        socket_dir: args.socket_dir,
        config: holder::session::Config {
            max_sessions: usize::from(args.max_sessions),
            detached_ttl: args.detached_ttl,
            scrollback: args.scrollback as usize,
            shell: args.shell,
            grace: args.kill_grace,
        },
        command: args.command,
    }
}
