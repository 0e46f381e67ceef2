//! Logging set-up for the binary: text or JSON, filtered by `RUST_LOG` (default `info`).

use tracing_subscriber::EnvFilter;

use crate::args::LogFormat;

/// Install the global subscriber. Logs never carry tokens or keys: the controller logs object
/// names, reasons and errors only.
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
