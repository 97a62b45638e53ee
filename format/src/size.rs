//! Byte counts in words, as the shim's exit line and every report write them: one formatter, so
//! `4.00 MiB` on the program's stderr is `4.00 MiB` in the report.
//!
//! Pure formatting; never panics.

/// `512 B`, `74.10 KiB`, `4.00 MiB`: two decimals in the largest binary unit that keeps the
/// number at least 1 (and below 1024 once rounded).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    // Move up a unit when rounding to two decimals would print 1024.00.
    while unit + 1 < UNITS.len() && value >= 1023.995 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

/// [`human_bytes`] with the exact count beside a rounded one: `4.00 MiB (4194304 B)`; `512 B`
/// alone.
pub fn human_bytes_exact(n: u64) -> String {
    if n < 1024 {
        human_bytes(n)
    } else {
        format!("{} ({n} B)", human_bytes(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_binary_units_with_two_decimals() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.00 KiB");
        assert_eq!(human_bytes(75_878), "74.10 KiB");
        assert_eq!(human_bytes(4 << 20), "4.00 MiB");
        assert_eq!(human_bytes((1 << 20) - 1), "1.00 MiB");
        assert_eq!(human_bytes(3 << 30), "3.00 GiB");
        assert_eq!(human_bytes(u64::MAX), "16.00 EiB");
        assert_eq!(human_bytes_exact(4 << 20), "4.00 MiB (4194304 B)");
        assert_eq!(human_bytes_exact(512), "512 B");
    }
}
