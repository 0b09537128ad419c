//! Facts about the machine a benchmark ran on, and small helpers for the
//! reports the benchmark binaries print. Linux `/proc` first; "unknown"
//! elsewhere.

use std::path::Path;

/// Clock ticks per second of /proc/*/stat (USER_HZ; 100 on Linux).
const TICKS_PER_SEC: f64 = 100.0;

/// User + system CPU seconds from a `/proc/{pid|self|thread-self}/stat`
/// file; `None` when it cannot be read.
pub fn stat_cpu_secs(path: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after "(comm)": state is field 3, utime 14, stime 15.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(11)? + ticks(12)?) / TICKS_PER_SEC)
}

/// The CPU model name.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

/// Kernel name and release.
pub fn kernel() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    match (
        read("/proc/sys/kernel/ostype"),
        read("/proc/sys/kernel/osrelease"),
    ) {
        (Some(os), Some(release)) => format!("{os} {release}"),
        _ => std::env::consts::OS.to_string(),
    }
}

/// Total memory, e.g. "23.5 GiB RAM".
pub fn memory() -> String {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(format!("{:.1} GiB RAM", kib / (1 << 20) as f64))
        })
        .unwrap_or_else(|| "RAM unknown".into())
}

/// (device, filesystem type, mount options) of the mount holding `dir`.
pub fn filesystem(dir: &Path) -> Option<(String, String, String)> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (dev, mount, fstype, options) = (f.next()?, f.next()?, f.next()?, f.next()?);
            let mount = mount.replace("\\040", " ");
            dir.starts_with(&mount)
                .then(|| (mount.len(), (dev.into(), fstype.into(), options.into())))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, fs)| fs)
}

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    kappa_processor::expr::format_timestamp(kappa_log::now_ms())
        .map_or_else(|| "unknown date".into(), |t| t[..10].to_string())
}

/// Quotes `arg` for a shell command line when it needs it.
pub fn shell_quote(arg: &str) -> String {
    let safe = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_=.,/:+@%".contains(&b));
    if safe {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn today_is_an_iso_date() {
        let d = today();
        assert_eq!(d.len(), 10, "{d}");
        assert_eq!((&d[4..5], &d[7..8]), ("-", "-"));
    }

    #[test]
    fn shell_quote_quotes_only_when_needed() {
        assert_eq!(shell_quote("--runs=3"), "--runs=3");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
