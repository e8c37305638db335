//! The host's default memory budget for all running calls together: a
//! share of what this process may really use, which in a container is its
//! control group's limit, not the node's memory.

/// The host's memory budget by default: this share of the machine's
/// physical memory for the linear memories of all running calls, so that
/// many parallel calls (128 by default, each allowed 256 MiB) cannot take
/// the machine down, while the host itself keeps the rest.
pub const DEFAULT_MEMORY_BUDGET_PERCENT: u64 = 50;

/// The budget when the machine's memory cannot be read.
pub const FALLBACK_MEMORY_BUDGET: u64 = 8 << 30;

/// [`DEFAULT_MEMORY_BUDGET_PERCENT`] of the memory this process may use:
/// the machine's (`MemTotal` in `/proc/meminfo`), or its control group's
/// limit when that is lower (a container's `resources.limits.memory`, or
/// the node's whole memory would be budgeted and the kernel's OOM killer,
/// not the budget, would stop the calls).
pub fn default_memory_budget() -> u64 {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    match usable_memory(
        read("/proc/meminfo").as_deref(),
        read("/sys/fs/cgroup/memory.max").as_deref(),
        read("/sys/fs/cgroup/memory/memory.limit_in_bytes").as_deref(),
    ) {
        Some(bytes) => bytes / 100 * DEFAULT_MEMORY_BUDGET_PERCENT,
        None => FALLBACK_MEMORY_BUDGET,
    }
}

/// The lower of the machine's memory and a cgroup limit, in bytes, from
/// the text of `/proc/meminfo`, cgroup v2's `memory.max` and cgroup v1's
/// `memory.limit_in_bytes` (whichever exist). `max`, and v1's "no limit"
/// (a number near `i64::MAX`), are no limit.
fn usable_memory(
    meminfo: Option<&str>,
    v2_max: Option<&str>,
    v1_limit: Option<&str>,
) -> Option<u64> {
    let machine = meminfo.and_then(|info| {
        info.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib.saturating_mul(1024))
    });
    let cgroup = v2_max
        .or(v1_limit)
        .and_then(|text| text.trim().parse::<u64>().ok())
        .filter(|&limit| limit > 0 && limit < (1 << 60));
    match (machine, cgroup) {
        (Some(machine), Some(cgroup)) => Some(machine.min(cgroup)),
        (machine, cgroup) => machine.or(cgroup),
    }
}

#[cfg(test)]
mod tests {
    use super::usable_memory;

    #[test]
    fn a_cgroup_limit_below_the_machine_wins_and_max_is_no_limit() {
        let meminfo = "MemTotal:       16384000 kB\nMemFree: 1 kB\n";
        let machine = 16_384_000u64 * 1024;
        assert_eq!(usable_memory(Some(meminfo), None, None), Some(machine));
        // A pod limited to 4 GiB.
        assert_eq!(
            usable_memory(Some(meminfo), Some("4294967296\n"), None),
            Some(4 << 30)
        );
        // cgroup v2 without a limit, and v1's "unlimited".
        assert_eq!(
            usable_memory(Some(meminfo), Some("max\n"), None),
            Some(machine)
        );
        assert_eq!(
            usable_memory(Some(meminfo), None, Some("9223372036854771712\n")),
            Some(machine)
        );
        // v1 limited; a limit above the machine's memory changes nothing.
        assert_eq!(
            usable_memory(Some(meminfo), None, Some("1073741824")),
            Some(1 << 30)
        );
        assert_eq!(
            usable_memory(Some(meminfo), Some(&(machine * 2).to_string()), None),
            Some(machine)
        );
        assert_eq!(usable_memory(None, Some("garbage"), None), None);
    }
}
