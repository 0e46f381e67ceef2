//! Progress lines for long steps: what is happening and how long it has taken; and, at the end
//! of `cargo xtask test` or `e2e`, one summary of where the time went.
//!
//! Every [`Step`] records itself (name, lane, start, duration) into one list for the whole
//! process, so the summary needs no bookkeeping from the callers. A lane is the thread a step ran
//! on: `main`, or a thread started with [`in_lane`] (the tool builds `cargo xtask test` runs
//! alongside the Rust build); lines printed from another lane say which.

use std::cell::Cell;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::machine_cpu::CpuTime;

/// How a step that only waits for another lane is named: the summary lists it, and does not
/// count it as busy.
pub const WAITING: &str = "(waiting)";

/// The lane of the thread that never called [`in_lane`].
const MAIN_LANE: &str = "main";

thread_local! {
    static LANE: Cell<&'static str> = const { Cell::new(MAIN_LANE) };
    /// How many steps of this thread are open: a step started inside another is nested in the
    /// summary.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// One finished (or abandoned) step, as the summary shows it.
#[derive(Debug, Clone)]
struct Entry {
    lane: &'static str,
    depth: usize,
    name: String,
    started: Instant,
    took: Duration,
    finished: bool,
    /// How many cores' worth the whole machine was busy during the step (every lane's work and
    /// every process's, not only this step's).
    cores_busy: Option<f64>,
}

/// Every step of this process, in the order they ended.
static TIMELINE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// Run `f` with this thread's steps and lines marked as `lane` (for a thread of its own).
pub fn in_lane<T>(lane: &'static str, f: impl FnOnce() -> T) -> T {
    let before = LANE.with(|l| l.replace(lane));
    let out = f();
    LANE.with(|l| l.set(before));
    out
}

/// `xtask: ` on the main lane, `xtask[lane]: ` on another, so interleaved lines can be told apart.
pub fn prefix() -> String {
    match LANE.with(Cell::get) {
        MAIN_LANE => "xtask:".to_owned(),
        lane => format!("xtask[{lane}]:"),
    }
}

/// A named step; prints when it starts, on [`Step::tick`] at most every `every`, and when done.
pub struct Step {
    name: String,
    started: Instant,
    last_tick: Instant,
    every: Duration,
    quiet: bool,
    finished: bool,
    depth: usize,
    cpu_at_start: Option<CpuTime>,
}

impl Step {
    pub fn start(name: impl Into<String>) -> Self {
        let step = Self::begin(name.into(), false);
        eprintln!("{} {} ...", prefix(), step.name);
        step
    }

    /// A step that prints nothing itself, for the summary only: it groups steps that print
    /// (e.g. "envtest binaries" around the kube-apiserver build), or times something cheap.
    pub fn quiet(name: impl Into<String>) -> Self {
        Self::begin(name.into(), true)
    }

    fn begin(name: String, quiet: bool) -> Self {
        let depth = DEPTH.with(|d| d.replace(d.get() + 1));
        let now = Instant::now();
        Self {
            name,
            started: now,
            last_tick: now,
            every: Duration::from_secs(15),
            quiet,
            finished: false,
            depth,
            cpu_at_start: CpuTime::now(),
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Print `detail` if the last progress line is older than the tick interval.
    pub fn tick(&mut self, detail: impl FnOnce() -> String) {
        if self.last_tick.elapsed() >= self.every {
            self.last_tick = Instant::now();
            eprintln!("{}   ... {} ({})", prefix(), detail(), format_duration(self.elapsed()));
        }
    }

    pub fn done(mut self) -> Duration {
        let took = self.elapsed();
        if !self.quiet {
            eprintln!("{} {} done ({})", prefix(), self.name, format_duration(took));
        }
        self.finished = true;
        took
    }
}

impl Drop for Step {
    /// Records the step, finished or not: a step dropped without [`Step::done`] failed (its
    /// error is on its way up), and the summary says so.
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(self.depth));
        let entry = Entry {
            lane: LANE.with(Cell::get),
            depth: self.depth,
            name: std::mem::take(&mut self.name),
            started: self.started,
            took: self.elapsed(),
            finished: self.finished,
            cores_busy: self.cpu_at_start.zip(CpuTime::now()).and_then(|(a, b)| a.cores_busy_until(&b)),
        };
        TIMELINE.lock().unwrap_or_else(PoisonError::into_inner).push(entry);
    }
}

/// Run `f` as a [`Step::quiet`] named `name`: done when it returns `Ok`.
pub fn timed<T>(name: &str, f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    let step = Step::quiet(name);
    let out = f()?;
    step.done();
    Ok(out)
}

/// When a run started, by the clock and by the machine's CPU time.
#[derive(Clone, Copy)]
pub struct Started {
    pub at: Instant,
    cpu: Option<CpuTime>,
}

impl Started {
    pub fn now() -> Self {
        Self { at: Instant::now(), cpu: CpuTime::now() }
    }
}

/// Print every step recorded since `since`, in the order they started, then the wall time, how
/// long each lane was busy (lanes busy for longer than the wall in total ran side by side) and
/// how busy the machine's cores were.
pub fn print_summary(since: Started) {
    let wall = since.at.elapsed();
    let entries = TIMELINE.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let machine = since.cpu.zip(CpuTime::now()).and_then(|(a, b)| Some((a.cores_busy_until(&b)?, a.cores())));
    for line in summary_lines(&entries, since.at, wall, machine) {
        eprintln!("xtask: {line}");
    }
}

fn summary_lines(entries: &[Entry], since: Instant, wall: Duration, machine: Option<(f64, usize)>) -> Vec<String> {
    let mut entries: Vec<&Entry> = entries.iter().filter(|e| e.started >= since).collect();
    entries.sort_by_key(|e| (e.started, e.depth));
    let mut lines =
        vec![format!("where the time went ({} steps; start, took, cores the machine kept busy, lane):", entries.len())];
    for e in &entries {
        let start = format_duration(e.started.duration_since(since));
        let failed = if e.finished { "" } else { "  (failed)" };
        let indent = "  ".repeat(e.depth);
        let cores = e.cores_busy.map(|c| format!("{c:.1}")).unwrap_or_else(|| "-".to_owned());
        lines.push(format!(
            "  {start:>7} {:>7} {cores:>4}  {:<5}  {indent}{}{failed}",
            format_duration(e.took),
            e.lane,
            shorten(&e.name, 90)
        ));
    }
    let mut lanes: Vec<(&str, Duration)> = Vec::new();
    for e in entries.iter().filter(|e| e.depth == 0 && !e.name.starts_with(WAITING)) {
        match lanes.iter_mut().find(|(lane, _)| *lane == e.lane) {
            Some((_, busy)) => *busy += e.took,
            None => lanes.push((e.lane, e.took)),
        }
    }
    let busy: Vec<String> = lanes.iter().map(|(lane, d)| format!("{lane} {}", format_duration(*d))).collect();
    let alongside = if lanes.len() > 1 { "; the lanes ran alongside each other" } else { "" };
    let machine =
        machine.map(|(busy, cores)| format!("; the machine's cores: {busy:.1} of {cores} busy")).unwrap_or_default();
    lines.push(format!("wall {}; busy: {}{alongside}{machine}", format_duration(wall), busy.join(", ")));
    lines
}

/// `name` cut to `max` characters (a step's name may hold a long cache path).
fn shorten(name: &str, max: usize) -> String {
    if name.chars().count() <= max {
        return name.to_owned();
    }
    let cut: String = name.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 { format!("{secs:.1}s") } else { format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(lane: &'static str, depth: usize, name: &str, at: Instant, start: u64, took: u64) -> Entry {
        Entry {
            lane,
            depth,
            name: name.into(),
            started: at + Duration::from_secs(start),
            took: Duration::from_secs(took),
            finished: name != "broken",
            cores_busy: (name != "broken").then_some(1.2),
        }
    }

    #[test]
    fn the_summary_lists_steps_by_start_with_lanes_nesting_and_busy_time() {
        let at = Instant::now();
        let entries = [
            entry("main", 0, "cargo clippy", at, 10, 100),
            entry("tools", 1, "go build kube-apiserver", at, 1, 290),
            entry("tools", 0, "envtest binaries", at, 0, 300),
            entry("main", 0, "broken", at, 110, 5),
            entry("main", 0, "(waiting) the tools", at, 115, 200),
        ];
        let lines = summary_lines(&entries, at, Duration::from_secs(320), Some((1.44, 2)));
        assert_eq!(lines.len(), 7, "{lines:#?}");
        assert!(lines[1].ends_with("tools  envtest binaries"), "{}", lines[1]);
        assert!(lines[2].ends_with("tools    go build kube-apiserver"), "{}", lines[2]);
        assert!(lines[3].contains("  10.0s   1m40s  1.2  main   cargo clippy"), "{}", lines[3]);
        assert!(lines[4].contains("   -  main   broken  (failed)"), "{}", lines[4]);
        assert!(lines[5].ends_with("main   (waiting) the tools"), "{}", lines[5]);
        assert_eq!(
            lines[6],
            "wall 5m20s; busy: tools 5m00s, main 1m45s; the lanes ran alongside each other; the machine's cores: 1.4 of 2 busy"
        );
    }

    #[test]
    fn steps_record_their_lane_and_depth() {
        let since = Instant::now();
        in_lane("probe", || {
            let outer = Step::quiet("outer-probe");
            Step::quiet("inner-probe").done();
            drop(outer);
        });
        let entries = TIMELINE.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let find = |n: &str| entries.iter().find(|e| e.name == n && e.started >= since).cloned();
        let (inner, outer) = (find("inner-probe").unwrap(), find("outer-probe").unwrap());
        assert_eq!((inner.lane, inner.depth, inner.finished), ("probe", 1, true));
        assert_eq!((outer.lane, outer.depth, outer.finished), ("probe", 0, false));
        assert_eq!(prefix(), "xtask:");
    }

    #[test]
    fn long_names_are_cut() {
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abc", 4), "abc");
    }
}
