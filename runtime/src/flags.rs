//! Flags every binary shares, as kubebuilder-generated managers spell them.

use std::net::SocketAddr;

use clap::Args;

use crate::log::LogFormat;

/// Where to serve something, or nowhere (`0`, as in controller-runtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindAddress {
    /// Not served at all.
    Disabled,
    /// Served on this address.
    At(SocketAddr),
}

/// Parse `HOST:PORT`, `:PORT` (every interface, as in Go) or `0` (disabled).
pub fn parse_bind_address(value: &str) -> Result<BindAddress, String> {
    if value == "0" {
        return Ok(BindAddress::Disabled);
    }
    let full = if value.starts_with(':') { format!("0.0.0.0{value}") } else { value.to_owned() };
    full.parse()
        .map(BindAddress::At)
        .map_err(|_| format!("expected HOST:PORT, :PORT (e.g. :8081) or 0 to disable, got {value:?}"))
}

/// `--health-probe-bind-address`, flattened into each binary's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct ProbeArgs {
    /// Address of `/healthz` and `/readyz` (plain HTTP), or 0 to disable them.
    #[arg(long, default_value = "0.0.0.0:8081", value_parser = parse_bind_address)]
    pub health_probe_bind_address: BindAddress,
}

/// `--log-format`, flattened into each binary's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct LogArgs {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses() {
        let at = |s: &str| BindAddress::At(s.parse().unwrap_or_else(|e| panic!("{s}: {e}")));
        let cases = [
            ("0", Ok(BindAddress::Disabled)),
            ("127.0.0.1:8080", Ok(at("127.0.0.1:8080"))),
            (":8081", Ok(at("0.0.0.0:8081"))),
            ("[::1]:8443", Ok(at("[::1]:8443"))),
        ];
        for (text, want) in cases {
            assert_eq!(parse_bind_address(text), want, "{text}");
        }
        for bad in ["8080", "localhost:80", "", "1.2.3.4"] {
            let err = parse_bind_address(bad).unwrap_err();
            assert!(err.contains("HOST:PORT") && err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }
}
