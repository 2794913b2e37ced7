//! CPU time spent by this process, and by the bare baseline's threads within it, read from
//! `/proc` (Linux; `None` elsewhere). On a small shared machine throughput ratios hide where
//! the CPU goes; CPU per execution shows what the client costs and what the server costs.

use std::time::Duration;

/// The thread name the bare baseline's server threads carry (see `bare`).
pub const BARE_THREAD: &str = "bare-tonic";

/// Linux reports CPU time in USER_HZ ticks, which the kernel ABI fixes at 100 per second.
const TICK: Duration = Duration::from_millis(10);

/// CPU time used so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// The whole process (user + system).
    pub process: Duration,
    /// Its threads named [`BARE_THREAD`].
    pub bare: Duration,
}

impl CpuTime {
    /// What was used between `earlier` and `self`.
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            process: self.process.saturating_sub(earlier.process),
            bare: self.bare.saturating_sub(earlier.bare),
        }
    }
}

/// utime + stime from the text of a `/proc/.../stat` file.
fn ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses: fields are counted after
    // its closing parenthesis, where field 3 (state) comes first; utime and stime are 14, 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Now, or `None` without `/proc`.
pub fn now() -> Option<CpuTime> {
    let process = ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
    let mut bare = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let path = task.path();
        let named = std::fs::read_to_string(path.join("comm"))
            .is_ok_and(|comm| comm.trim_end() == BARE_THREAD);
        if named && let Ok(stat) = std::fs::read_to_string(path.join("stat")) {
            bare += ticks(&stat).unwrap_or(0);
        }
    }
    Some(CpuTime {
        process: TICK * u32::try_from(process).unwrap_or(u32::MAX),
        bare: TICK * u32::try_from(bare).unwrap_or(u32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_utime_and_stime_past_an_awkward_command_name() {
        let stat = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 17 0 0 20 0 3 0";
        assert_eq!(ticks(stat), Some(267));
        assert_eq!(ticks("garbage"), None);
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        if cfg!(target_os = "linux") {
            let spin = (0..2_000_000u64).fold(0u64, |a, b| a.wrapping_add(b * b));
            assert!(spin > 0);
            let t = now();
            assert!(t.is_some());
        }
    }
}
