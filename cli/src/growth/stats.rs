//! The statistics of the rule for long series (`judge_kept`): the record test's chances of a
//! new high, the Poisson-binomial tail that tests how many were seen, and Mann–Kendall's trend
//! test (with the complementary error function it needs). Pure numbers: no dumps, no callsites.

/// The tests' numbers (see [`Evidence`](super::Evidence)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub rose: u64,
    pub fell: u64,
    pub late: u64,
    pub late_highs: u64,
    pub expected_late_highs: f64,
    pub p_highs: f64,
    pub p_trend: f64,
    pub alpha: f64,
}

/// The record test's chances: for each point of the second half of `bytes` (read at the
/// moments `levels`), the chance that it is a new high under a stationary workload,
/// (t_k − t_{k−1}) / (t_k − t_0); and how many of those points were new highs.
pub(super) fn late_records(bytes: &[u64], levels: &[u64]) -> (Vec<f64>, u64) {
    let m = bytes.len();
    let late_from = m - m / 2;
    let mut high = bytes.first().copied().unwrap_or(0);
    let mut late_highs = 0u64;
    let mut p_late = Vec::with_capacity(m / 2);
    for k in 1..m {
        let is_high = bytes[k] > high;
        high = high.max(bytes[k]);
        if k < late_from {
            continue;
        }
        let (t0, prev, t) = (levels[0], levels[k - 1], levels[k]);
        let p = if t > t0 {
            (t.saturating_sub(prev) as f64 / (t - t0) as f64).clamp(0.0, 1.0)
        } else {
            1.0
        };
        p_late.push(p);
        late_highs += u64::from(is_high);
    }
    (p_late, late_highs)
}

/// P(X ≥ n) for X the number of successes of independent trials with probabilities `p`
/// (Poisson-binomial; exact, by dynamic programming).
pub(super) fn at_least(p: &[f64], n: u64) -> f64 {
    // dist[j]: the chance of j successes so far.
    let mut dist = vec![0.0; p.len() + 1];
    dist[0] = 1.0;
    for (i, &q) in p.iter().enumerate() {
        for j in (0..=i + 1).rev() {
            let stay = dist[j] * (1.0 - q);
            let came = if j > 0 { dist[j - 1] * q } else { 0.0 };
            dist[j] = stay + came;
        }
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    dist.iter().skip(n).sum::<f64>().clamp(0.0, 1.0)
}

/// One-sided Mann–Kendall test for an upward trend: the chance of S (pairs rising minus
/// pairs falling) as large as this one in a series without trend, by the normal approximation
/// with the variance corrected for ties and a continuity correction.
pub(super) fn mann_kendall(x: &[u64]) -> f64 {
    let n = x.len();
    let mut s: i64 = 0;
    for i in 0..n {
        for j in i + 1..n {
            s += match x[j].cmp(&x[i]) {
                std::cmp::Ordering::Greater => 1,
                std::cmp::Ordering::Less => -1,
                std::cmp::Ordering::Equal => 0,
            };
        }
    }
    let mut sorted = x.to_vec();
    sorted.sort_unstable();
    let tie_term: f64 = sorted
        .chunk_by(|a, b| a == b)
        .map(|g| {
            let t = g.len() as f64;
            t * (t - 1.0) * (2.0 * t + 5.0)
        })
        .sum();
    let nf = n as f64;
    let var = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - tie_term) / 18.0;
    if s <= 0 || var <= 0.0 {
        return 1.0;
    }
    let z = (s as f64 - 1.0) / var.sqrt();
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function (Numerical Recipes' erfcc: relative error below 1.2e-7).
pub(super) fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}
