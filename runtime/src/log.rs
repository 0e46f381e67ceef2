//! Logging set-up: text or JSON on stderr, filtered by `RUST_LOG` (default `info`).

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// How log lines are written: `text`, one human-readable line per event, or `json`, one JSON
/// object per event with its fields at the top level (for log collectors).
// The variants go undocumented on purpose: clap shows a variant's doc comment as help for
// that value, which switches every binary's `--help` to its long layout.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Install the global subscriber. The binaries log object names, reasons and errors only,
/// never tokens or keys.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only for a person at a terminal, not in log files or collectors.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    if let Err(e) = installed {
        eprintln!("logging was already set up: {e}");
    }
}
