//! The shim's hashes: addresses and stacks are hashed on every call, so each is one cheap mix
//! rather than the standard library's SipHash.

use std::hash::{BuildHasherDefault, Hasher};

/// MurmurHash3's finaliser: every input bit reaches every output bit, so aligned addresses
/// (low bits all zero) still spread over both the shards (high bits) and the buckets (low bits).
pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Addresses are mixed once; the map needs no second, slower hash.
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = mix(n);
    }
    /// Stack ids are keys too (see `table::Shard::by_stack`).
    fn write_u32(&mut self, n: u32) {
        self.0 = mix(u64::from(n));
    }
}

pub type AddrHash = BuildHasherDefault<AddrHasher>;

#[derive(Default)]
pub struct StackHasher(u64);

impl Hasher for StackHasher {
    fn finish(&self) -> u64 {
        mix(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_usize(usize::from(b));
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}
