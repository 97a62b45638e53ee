//! Byte offset of an instruction → source line, from a copy of a code object's line table, in
//! each format CPython has used since 3.9 (the algorithms of `PyCode_Addr2Line` in
//! Objects/codeobject.c of each version). Safe code on plain bytes; runs at dump time only.
#![forbid(unsafe_code)]

use super::layout::LineFormat;

/// The line of the instruction at byte offset `offset` (negative: the frame has not started, its
/// line is the first), or `None` for an instruction without a line.
pub fn line_of(format: LineFormat, table: &[u8], first_line: i32, offset: i64) -> Option<i32> {
    if offset < 0 {
        return Some(first_line);
    }
    match format {
        LineFormat::Lnotab => Some(lnotab(table, first_line, offset)),
        LineFormat::Pep626 => pep626(table, first_line, offset),
        LineFormat::Pep657 => pep657(table, first_line, offset),
    }
}

/// 3.9: pairs of (address increment, signed line increment).
fn lnotab(table: &[u8], first_line: i32, offset: i64) -> i32 {
    let (mut line, mut addr) = (first_line, 0i64);
    for pair in table.chunks_exact(2) {
        addr += i64::from(pair[0]);
        if addr > offset {
            break;
        }
        line += i32::from(pair[1] as i8);
    }
    line
}

/// 3.10: pairs of (byte length of a range, signed line delta or -128 for "no line").
fn pep626(table: &[u8], first_line: i32, offset: i64) -> Option<i32> {
    let (mut end, mut line) = (0i64, first_line);
    for pair in table.chunks_exact(2) {
        let start = end;
        end += i64::from(pair[0]);
        let delta = pair[1] as i8;
        let this = if delta == -128 {
            None
        } else {
            line += i32::from(delta);
            Some(line)
        };
        if end > start && end > offset {
            return this;
        }
    }
    None
}

/// 3.11+: entries of one start byte (bit 7 set; bits 3–6 a code, bits 0–2 the range's length in
/// code units minus one) and varints for the line delta (codes 13, 14) and columns.
fn pep657(table: &[u8], first_line: i32, offset: i64) -> Option<i32> {
    let (mut i, mut end, mut line) = (0usize, 0i64, first_line);
    while i < table.len() {
        let b = table[i];
        let code = (b >> 3) & 15;
        let delta = match code {
            13 | 14 => signed_varint(table.get(i + 1..).unwrap_or(&[])),
            11 => 1,
            12 => 2,
            _ => 0,
        };
        line = line.wrapping_add(delta);
        end += (i64::from(b & 7) + 1) * 2;
        if end > offset {
            return (code != 15).then_some(line);
        }
        i += 1;
        while i < table.len() && table[i] & 128 == 0 {
            i += 1;
        }
    }
    None
}

fn varint(bytes: &[u8]) -> u32 {
    let (mut val, mut shift) = (0u32, 0u32);
    for &b in bytes {
        val |= u32::from(b & 63).checked_shl(shift).unwrap_or(0);
        shift += 6;
        if b & 64 == 0 {
            break;
        }
    }
    val
}

fn signed_varint(bytes: &[u8]) -> i32 {
    let v = varint(bytes);
    if v & 1 == 1 {
        -((v >> 1) as i32)
    } else {
        (v >> 1) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lnotab_adds_line_increments_up_to_the_offset() {
        // Lines 10 (bytes 0..6), 12 (6..10), 11 (10..).
        let t = [6, 2, 4, (-1i8) as u8];
        assert_eq!(line_of(LineFormat::Lnotab, &t, 10, 0), Some(10));
        assert_eq!(line_of(LineFormat::Lnotab, &t, 10, 5), Some(10));
        assert_eq!(line_of(LineFormat::Lnotab, &t, 10, 6), Some(12));
        assert_eq!(line_of(LineFormat::Lnotab, &t, 10, 40), Some(11));
        assert_eq!(line_of(LineFormat::Lnotab, &t, 10, -1), Some(10));
    }

    #[test]
    fn pep626_ranges_and_no_line_entries() {
        // 0..4 line 5+1, 4..4 (empty, +3), 4..8 no line, 8..10 line 9+2-1
        let t = [4, 1, 0, 3, 4, 0x80, 2, (-1i8) as u8];
        assert_eq!(line_of(LineFormat::Pep626, &t, 5, 0), Some(6));
        assert_eq!(line_of(LineFormat::Pep626, &t, 5, 3), Some(6));
        assert_eq!(line_of(LineFormat::Pep626, &t, 5, 4), None);
        assert_eq!(line_of(LineFormat::Pep626, &t, 5, 8), Some(8));
        assert_eq!(line_of(LineFormat::Pep626, &t, 5, 10), None, "past the end");
    }

    #[test]
    fn pep657_short_one_line_long_and_none_entries() {
        let t = [
            0x80 | (13 << 3),     // 1 unit, no columns, delta varint follows
            0x02,                 // +1
            0x80 | (11 << 3) | 1, // 2 units, one-line form, +1
            5,
            6,                   // columns (skipped)
            0x80 | (5 << 3) | 2, // 3 units, short form, same line
            7,
            0x80 | (15 << 3), // 1 unit, no location
            0x80 | (14 << 3), // 1 unit, long form, delta -3
            0x07,
            0,
            0,
            0,
        ];
        let l = |o| line_of(LineFormat::Pep657, &t, 100, o);
        assert_eq!(l(0), Some(101));
        assert_eq!(l(2), Some(102));
        assert_eq!(l(5), Some(102));
        assert_eq!(l(6), Some(102));
        assert_eq!(l(11), Some(102));
        assert_eq!(l(12), None);
        assert_eq!(l(14), Some(99));
        assert_eq!(l(16), None, "past the end");
    }

    #[test]
    fn varints_use_six_bits_a_byte() {
        assert_eq!(varint(&[0x41, 0x01]), 1 | 1 << 6);
        assert_eq!(signed_varint(&[0x03]), -1);
        assert_eq!(signed_varint(&[0x04]), 2);
        assert_eq!(
            varint(&[0x7f; 20]),
            u32::MAX >> 2 | 0xc000_0000,
            "no overflow panic"
        );
    }
}
