//! The timing model of one request: TTFT (plus prefill by prompt length) and inter-token gaps,
//! sampled from the configured distributions or fixed by `x-sim-*` headers.

use std::time::Duration;

use crate::dist::Dist;

pub struct Timing {
    pub ttft_ms: Dist,
    pub itl_ms: Dist,
    pub prefill_ms_per_1k: f64,
    pub rng: fastrand::Rng,
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v.max(0.0) / 1000.0)
}

impl Timing {
    pub fn first_token(&mut self, prompt_tokens: u64) -> Duration {
        ms(self.ttft_ms.sample(&mut self.rng) + self.prefill_ms_per_1k * prompt_tokens as f64 / 1000.0)
    }

    pub fn next_gap(&mut self) -> Duration {
        ms(self.itl_ms.sample(&mut self.rng))
    }

    /// Time to generate a whole non-streamed answer of `tokens` tokens.
    pub fn whole(&mut self, prompt_tokens: u64, tokens: u32) -> Duration {
        let mut total = self.first_token(prompt_tokens);
        for _ in 1..tokens {
            total += self.next_gap();
        }
        total
    }
}
