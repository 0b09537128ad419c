//! Deterministic key choice: a small seeded PRNG (SplitMix64) and a key
//! distribution over `N` keys, uniform or Zipf (`P(rank k) ∝ 1 / (k+1)^s`).
//! The same seed always yields the same key sequence, on every platform.

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Context};

/// SplitMix64: tiny, fast, and good enough to draw benchmark keys.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `0..n` (`n > 0`), by Lemire's multiply-shift.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// How keys are drawn: `uniform` or `zipf:S` (S > 0, e.g. `zipf:1.1`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Skew {
    /// Every key equally likely.
    Uniform,
    /// Zipf with this exponent: rank 0 is the most frequent key.
    Zipf(f64),
}

impl FromStr for Skew {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Skew> {
        if s == "uniform" {
            return Ok(Skew::Uniform);
        }
        let Some(exponent) = s.strip_prefix("zipf:") else {
            bail!("skew must be `uniform` or `zipf:S` (e.g. zipf:1.1), got {s:?}");
        };
        let exponent: f64 = exponent
            .parse()
            .with_context(|| format!("zipf exponent {exponent:?} is not a number"))?;
        if !(exponent.is_finite() && exponent > 0.0) {
            bail!("zipf exponent must be > 0, got {exponent}");
        }
        Ok(Skew::Zipf(exponent))
    }
}

impl serde::Serialize for Skew {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for Skew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skew::Uniform => f.write_str("uniform"),
            Skew::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

/// Draws key ranks in `0..keys` with a [`Skew`], deterministically from a seed.
#[derive(Debug, Clone)]
pub struct KeyGen {
    rng: Rng,
    keys: u64,
    /// Zipf only: cumulative weights of ranks `0..=k`, normalised to end at 1.
    cdf: Option<Vec<f64>>,
}

impl KeyGen {
    /// A generator over `keys` keys (`keys > 0`).
    pub fn new(keys: u64, skew: Skew, seed: u64) -> KeyGen {
        assert!(keys > 0, "KeyGen needs at least one key");
        let cdf = match skew {
            Skew::Uniform => None,
            Skew::Zipf(s) => Some(zipf_cdf(keys, s)),
        };
        KeyGen {
            rng: Rng::new(seed),
            keys,
            cdf,
        }
    }

    /// The next key rank.
    pub fn next_rank(&mut self) -> u64 {
        match &self.cdf {
            None => self.rng.below(self.keys),
            Some(cdf) => {
                let u = self.rng.next_f64();
                // First rank whose cumulative weight exceeds u.
                let rank = cdf.partition_point(|&c| c <= u);
                rank.min(cdf.len() - 1) as u64
            }
        }
    }

    /// The next key as text: `u<rank>`.
    pub fn next_key(&mut self) -> String {
        format!("u{}", self.next_rank())
    }
}

/// Cumulative Zipf weights of ranks `0..keys`, normalised so the last is 1.
fn zipf_cdf(keys: u64, exponent: f64) -> Vec<f64> {
    let mut cdf = Vec::with_capacity(keys as usize);
    let mut total = 0.0;
    for k in 0..keys {
        total += 1.0 / ((k + 1) as f64).powf(exponent);
        cdf.push(total);
    }
    for c in &mut cdf {
        *c /= total;
    }
    cdf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(keys: u64, skew: Skew, seed: u64, n: usize) -> Vec<u64> {
        let mut g = KeyGen::new(keys, skew, seed);
        (0..n).map(|_| g.next_rank()).collect()
    }

    #[test]
    fn same_seed_same_keys_different_seed_different_keys() {
        for skew in [Skew::Uniform, Skew::Zipf(1.1)] {
            let a = draw(1000, skew, 42, 500);
            assert_eq!(a, draw(1000, skew, 42, 500), "{skew}");
            assert_ne!(a, draw(1000, skew, 43, 500), "{skew}");
            assert!(a.iter().all(|&k| k < 1000));
        }
    }

    #[test]
    fn sequence_is_pinned_for_a_seed() {
        // Guards against accidental changes of the generator: results files
        // of different versions stay comparable only if keys stay the same.
        assert_eq!(Rng::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(
            draw(100, Skew::Zipf(1.0), 7, 5),
            draw(100, Skew::Zipf(1.0), 7, 5)
        );
    }

    #[test]
    fn zipf_favours_low_ranks_in_the_expected_ratio() {
        let ranks = draw(1000, Skew::Zipf(1.0), 1, 200_000);
        let count = |r| ranks.iter().filter(|&&k| k == r).count() as f64;
        let (c0, c1, c9) = (count(0), count(1), count(9));
        // P(0)/P(1) = 2 and P(0)/P(9) = 10 for s = 1.
        assert!((c0 / c1 - 2.0).abs() < 0.15, "{c0} / {c1}");
        assert!((c0 / c9 - 10.0).abs() < 1.5, "{c0} / {c9}");
        assert!(ranks.iter().any(|&k| k > 500), "the tail is reachable");
    }

    #[test]
    fn uniform_is_roughly_flat() {
        let ranks = draw(10, Skew::Uniform, 3, 100_000);
        for r in 0..10 {
            let c = ranks.iter().filter(|&&k| k == r).count();
            assert!((9_000..11_000).contains(&c), "rank {r}: {c}");
        }
    }

    #[test]
    fn skew_parses_and_displays() {
        assert_eq!("uniform".parse::<Skew>().unwrap(), Skew::Uniform);
        assert_eq!("zipf:1.2".parse::<Skew>().unwrap(), Skew::Zipf(1.2));
        assert_eq!(Skew::Zipf(1.2).to_string(), "zipf:1.2");
        for bad in ["zipf", "zipf:", "zipf:-1", "zipf:0", "zipf:x", "normal"] {
            assert!(bad.parse::<Skew>().is_err(), "{bad}");
        }
    }

    #[test]
    fn single_key_always_rank_zero() {
        assert!(draw(1, Skew::Zipf(2.0), 9, 100).iter().all(|&k| k == 0));
        assert!(draw(1, Skew::Uniform, 9, 100).iter().all(|&k| k == 0));
    }
}
