//! The command line of `cargo xtask bench controller`.

pub(crate) struct Options {
    pub(crate) objects: usize,
    pub(crate) concurrency: usize,
    /// Run the controller under heaptrack, writing its profile here.
    pub(crate) heap_profile: Option<std::path::PathBuf>,
    /// Seconds of each churn phase (0: none).
    pub(crate) churn_seconds: u64,
    /// Updates per second, one churn phase each.
    pub(crate) churn_rates: Vec<u32>,
    /// Shells whose stop is timed at the end (0: none).
    pub(crate) stops: usize,
    /// Stops due per second (one patch each, so also patches per second).
    pub(crate) stop_rate: u32,
    /// Every shell with a home (`crate::homes`).
    pub(crate) homes: bool,
    /// Run the floors (and each write's cost alone); without them only the controller's phase
    /// runs, for its RSS and writes where the floors take longer than the machine has
    /// (`--no-floors`: no churn, no stops, no ratios).
    pub(crate) floors: bool,
}

pub(crate) fn options() -> Options {
    let mut options = Options {
        objects: 1000,
        concurrency: 128,
        heap_profile: None,
        churn_seconds: 60,
        churn_rates: vec![100, 400],
        stops: 2000,
        stop_rate: crate::STOP_RATE,
        homes: false,
        floors: true,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = || args.get(i + 1).and_then(|v| v.parse::<usize>().ok()).filter(|v| *v > 0);
        match args[i].as_str() {
            "--objects" => options.objects = value().unwrap_or_else(|| usage("--objects needs a positive number")),
            "--concurrency" => {
                options.concurrency = value().unwrap_or_else(|| usage("--concurrency needs a positive number"))
            }
            "--churn-seconds" => {
                let seconds = args.get(i + 1).and_then(|v| v.parse().ok());
                options.churn_seconds = seconds.unwrap_or_else(|| usage("--churn-seconds needs a number"));
            }
            "--churn-rates" => {
                let rates: Option<Vec<u32>> = args
                    .get(i + 1)
                    .map(|v| {
                        v.split(',')
                            .filter(|r| !r.is_empty())
                            .map(|r| r.trim().parse().ok().filter(|r| *r > 0))
                            .collect()
                    })
                    .unwrap_or_default();
                options.churn_rates =
                    rates.unwrap_or_else(|| usage("--churn-rates needs rates per second, e.g. 100,400"));
            }
            "--stops" => {
                let stops = args.get(i + 1).and_then(|v| v.parse().ok());
                options.stops = stops.unwrap_or_else(|| usage("--stops needs a number"));
            }
            "--stop-rate" => {
                let rate = args.get(i + 1).and_then(|v| v.parse().ok()).filter(|r| *r > 0);
                options.stop_rate =
                    rate.unwrap_or_else(|| usage("--stop-rate needs a positive number of stops a second"));
            }
            "--heap-profile" => {
                let path = args.get(i + 1).unwrap_or_else(|| usage("--heap-profile needs a path"));
                options.heap_profile = Some(path.into());
            }
            "--homes" => {
                options.homes = true;
                i += 1;
                continue;
            }
            "--no-floors" => {
                options.floors = false;
                i += 1;
                continue;
            }
            // `cargo bench` passes `--bench`; nothing else is expected.
            "--bench" => {
                i += 1;
                continue;
            }
            other => usage(&format!("unknown argument {other:?}")),
        }
        i += 2;
    }
    if !options.floors && (options.churn_seconds > 0 || options.stops > 0) {
        usage(
            "--no-floors runs neither churn nor stops (both are measured against the floor's Deployments): add --churn-seconds 0 --stops 0",
        );
    }
    options
}

pub(crate) fn usage(problem: &str) -> ! {
    eprintln!(
        "{problem}\nusage: cargo xtask bench controller [--objects N] [--concurrency C] [--churn-seconds S] [--churn-rates R,R] [--stops M] [--stop-rate R] [--homes] [--no-floors] [--heap-profile PATH]"
    );
    std::process::exit(2)
}
