//! Progress lines for long steps: what is happening and how long it has taken.

use std::time::{Duration, Instant};

/// A named step; prints when it starts, on [`Step::tick`] at most every `every`, and when done.
pub struct Step {
    name: String,
    started: Instant,
    last_tick: Instant,
    every: Duration,
}

impl Step {
    pub fn start(name: impl Into<String>) -> Self {
        let name = name.into();
        eprintln!("xtask: {name} ...");
        let now = Instant::now();
        Self { name, started: now, last_tick: now, every: Duration::from_secs(15) }
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Print `detail` if the last progress line is older than the tick interval.
    pub fn tick(&mut self, detail: impl FnOnce() -> String) {
        if self.last_tick.elapsed() >= self.every {
            self.last_tick = Instant::now();
            eprintln!("xtask:   ... {} ({})", detail(), format_duration(self.elapsed()));
        }
    }

    pub fn done(self) -> Duration {
        let took = self.elapsed();
        eprintln!("xtask: {} done ({})", self.name, format_duration(took));
        took
    }
}

pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 { format!("{secs:.1}s") } else { format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60) }
}
