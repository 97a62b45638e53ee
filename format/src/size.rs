//! Byte counts in words, as the shim's exit line and every report write them: one formatter, so
//! `4.00 MiB` on the program's stderr is `4.00 MiB` in the report; and the one grammar of sizes
//! a user writes (the CLI's options, the pytest plugin's markers, the Python API's limits).
//!
//! Never panics.

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

/// Parses a size a user wrote: a number (`4096`, `1.5`), optionally a unit, with or without a
/// space: `B`; `K`, `KB`, `KiB`; `M`, `MB`, `MiB`; `G`, `GB`, `GiB`; `T`, `TB`, `TiB`; any case.
/// Every unit is binary (`MB` as pytest-memray reads it, the same as `MiB`); a fraction is
/// rounded to the nearest byte. The error says what was wrong.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown size unit {other:?} (use a plain number of bytes or K, M, G, T, KB, MB, GB, TB, KiB, MiB, GiB, TiB: all binary)"
            ))
        }
    };
    if num.is_empty() {
        return Err(format!("{s:?} is not a size"));
    }
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(mult)
            .ok_or_else(|| format!("{s:?} is too large"));
    }
    match num.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 && f * (mult as f64) < u64::MAX as f64 => {
            Ok((f * mult as f64).round() as u64)
        }
        _ => Err(format!("{s:?} is not a size")),
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
