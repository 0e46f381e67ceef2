//! How busy the whole machine's CPUs were over a span of time, from `/proc/stat`: the summary of
//! `cargo xtask test` shows it per step, so that whether two steps could share the machine (a
//! wait-bound e2e beside CPU-bound workspace tests) is read from a run, not guessed.
//!
//! Hand-read: it is one line of `/proc/stat`. The `procfs` crate reads it too, with a dozen
//! dependencies more for xtask to build on a cold machine.

/// The machine's CPU time since boot, in clock ticks: spent working and in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTime {
    busy: u64,
    total: u64,
    cores: usize,
}

impl CpuTime {
    /// Now, or `None` where `/proc/stat` cannot be read (the summary then shows no CPU column).
    pub fn now() -> Option<Self> {
        parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// How many cores' worth were busy on average from `self` to `later`.
    pub fn cores_busy_until(&self, later: &CpuTime) -> Option<f64> {
        let total = later.total.checked_sub(self.total).filter(|t| *t > 0)?;
        let busy = later.busy.checked_sub(self.busy)?;
        Some(busy as f64 / total as f64 * self.cores as f64)
    }

    /// How many cores the machine has.
    pub fn cores(&self) -> usize {
        self.cores
    }
}

/// The aggregate `cpu` line (user nice system idle iowait irq softirq steal; guest time is
/// already inside user and nice) and the count of `cpuN` lines.
fn parse(stat: &str) -> Option<CpuTime> {
    let mut lines = stat.lines();
    let mut fields = lines.next()?.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let ticks: Vec<u64> = fields.take(8).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    if ticks.len() < 4 {
        return None;
    }
    let total: u64 = ticks.iter().sum();
    let idle = ticks[3] + ticks.get(4).copied().unwrap_or(0);
    let cores = lines.take_while(|l| l.starts_with("cpu")).count();
    (cores > 0).then_some(CpuTime { busy: total - idle, total, cores })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_CORES: &str =
        "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\ncpu1 50 0 25 400 25 0 0 0 0 0\nintr 1\n";

    #[test]
    fn proc_stat_is_read_into_busy_and_total_ticks() {
        let cpu = |busy, total, cores| Some(CpuTime { busy, total, cores });
        let table = [
            (TWO_CORES, cpu(150, 1000, 2)),
            // An old kernel's four fields.
            ("cpu 10 0 10 80\ncpu0 10 0 10 80\n", cpu(20, 100, 1)),
            ("", None),
            ("intr 1\n", None),
            ("cpu 10 x 10 80\ncpu0 1 1 1 1\n", None),
        ];
        for (stat, want) in table {
            assert_eq!(parse(stat), want, "{stat:?}");
        }
    }

    #[test]
    fn cores_busy_is_the_share_of_ticks_worked_times_the_cores() {
        let before = CpuTime { busy: 150, total: 1000, cores: 2 };
        let after = CpuTime { busy: 450, total: 1400, cores: 2 };
        assert_eq!(before.cores_busy_until(&after), Some(1.5));
        assert_eq!(before.cores_busy_until(&before), None, "no time passed");
        assert_eq!(after.cores_busy_until(&before), None, "time ran backwards");
        assert!(CpuTime::now().is_some_and(|t| t.cores() >= 1), "this machine's /proc/stat");
    }
}
