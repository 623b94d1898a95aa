//! Running the model under a press: prefill with the observation the press asks for, the press,
//! then one decode step at a time with the press's decode hook; memory measured after prefill and
//! at the end, against the real FullKV cache of the model's KV heads at the same token count.
//! Sliding-window layers hold their window only, and every press hook runs with them parked
//! ([`super::windowed`]): no press evicts there, re-assigns their positions or spends budget on
//! them.

use std::time::Instant;

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use super::{windowed, Press};
use kvplan_planner::budgets::full_kv_bytes;

use crate::cache::{KvCache, BYTES_PER_ELEMENT};
use crate::error::{Error, Result};
use crate::generate::{decode_loop, GenerateConfig, Sampler};
use crate::model::Model;
use crate::observe::{ObserveConfig, Observer};

/// Bytes held against the FullKV cache at the same number of tokens seen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryReport {
    /// Tokens the model has seen (prompt plus decoded).
    pub tokens: usize,
    /// Bytes the press's cache holds.
    pub held_bytes: u64,
    /// Bytes FullKV would hold ([`full_kv_bytes`]: 2 × head_dim × 4 × KV heads × Σ over layers
    /// of the tokens, a sliding-window layer's at most its window).
    pub full_bytes: u64,
}

impl MemoryReport {
    /// held / full (1 when nothing is held by either).
    pub fn ratio(&self) -> f64 {
        if self.full_bytes == 0 {
            1.0
        } else {
            self.held_bytes as f64 / self.full_bytes as f64
        }
    }
}

/// What one prefill must observe so that every press in `presses` can adopt a copy of it
/// ([`Session::adopt`]): the most rows any asks for, ending at `rows_end`, and column sums or
/// keys and values when any asks for them.
pub fn shared_observe<'p, B: Backend + 'p>(
    presses: impl IntoIterator<Item = &'p dyn Press<B>>,
    rows_end: Option<usize>,
) -> ObserveConfig {
    let mut config = ObserveConfig {
        rows_end,
        ..ObserveConfig::default()
    };
    for c in presses.into_iter().filter_map(|p| p.prefill_observe()) {
        config.attn_rows = config.attn_rows.max(c.attn_rows);
        config.column_sums |= c.column_sums;
        config.keys_values |= c.keys_values;
    }
    config
}

/// A cache, its press and the count of tokens seen.
pub struct Session<'a, B: Backend> {
    /// The model.
    pub model: &'a Model<B>,
    /// The compressed cache.
    pub cache: KvCache<B>,
    /// The press applied to it.
    pub press: &'a mut dyn Press<B>,
    /// Tokens run so far.
    pub tokens: usize,
    /// Where the prefill's observation rows end (an absolute position, exclusive): the end of
    /// the user's question; `None`: at the prompt's last token.
    pub rows_end: Option<usize>,
}

impl<'a, B: Backend> Session<'a, B> {
    /// An empty session.
    pub fn new(model: &'a Model<B>, press: &'a mut dyn Press<B>) -> Self {
        Self {
            model,
            cache: model.new_cache(),
            press,
            tokens: 0,
            rows_end: None,
        }
    }

    /// Runs the prompt and compresses the cache; returns the last position's logits.
    ///
    /// # Shapes
    /// - prompt: `t` tokens → `[1, vocab]`
    pub fn prefill(&mut self, prompt: &[u32]) -> Result<Tensor<B, 2>> {
        if self.tokens != 0 {
            return Err(Error::Request(
                "prefill on a session that already ran".into(),
            ));
        }
        let config = self.press.prefill_observe().map(|c| ObserveConfig {
            rows_end: self.rows_end,
            ..c
        });
        let mut obs = self.observer(config);
        if let Some(from) = self.rows_end {
            self.press.keep_prompt_tail(from);
        }
        let logits = self
            .press
            .forward(self.model, prompt, &mut self.cache, obs.as_mut())?;
        windowed::slide(&mut self.cache, &self.model.config.layer_windows);
        self.tokens += prompt.len();
        self.parked(|press, cache| press.after_prefill(cache, obs.as_ref()))?;
        Ok(logits)
    }

    /// An observer recording what `config` asks for, in the global layers only.
    fn observer(&self, config: Option<ObserveConfig>) -> Option<Observer> {
        let c = &self.model.config;
        let layers = c.geometry.layers;
        config.map(|o| Observer::new(windowed::observe_global(o, &c.layer_windows), layers))
    }

    /// Runs a press hook with the sliding-window layers parked ([`windowed::park`]).
    fn parked<T>(
        &mut self,
        hook: impl FnOnce(&mut dyn Press<B>, &mut KvCache<B>) -> Result<T>,
    ) -> Result<T> {
        let parked = windowed::park(&mut self.cache);
        let out = hook(&mut *self.press, &mut self.cache);
        let rope = self.model.rope_set_for(self.cache.next_position);
        windowed::unpark(&mut self.cache, parked, rope);
        out
    }

    /// Applies the press to a cache that already holds a prompt of `tokens` tokens, run with an
    /// observer recording at least what [`Press::prefill_observe`] asks (several presses can
    /// then share one prefill). Only for presses that keep the model's own forward pass.
    pub fn adopt(
        &mut self,
        cache: KvCache<B>,
        tokens: usize,
        obs: Option<&Observer>,
    ) -> Result<()> {
        if self.tokens != 0 {
            return Err(Error::Request("adopt on a session that already ran".into()));
        }
        self.cache = cache;
        self.tokens = tokens;
        if let Some(from) = self.rows_end {
            self.press.keep_prompt_tail(from);
        }
        let model = self.model;
        let windows = &model.config.layer_windows;
        windowed::slide(&mut self.cache, windows);
        let obs = obs.map(|o| windowed::global_observations(o, windows));
        self.parked(|press, cache| press.after_prefill(cache, obs.as_deref()))
    }

    /// Runs one token after the cache and applies the decode hook; returns its logits. When the
    /// next position would pass the model's trained context, the press first re-assigns its
    /// entries positions `0..len` ([`Press::reassign_positions`]); an error when it cannot, or
    /// when its cache still fills the context.
    ///
    /// # Shapes
    /// - returns `[1, vocab]`
    pub fn step(&mut self, id: u32) -> Result<Tensor<B, 2>> {
        let mut obs = self.before_step()?;
        let logits = self
            .press
            .forward(self.model, &[id], &mut self.cache, obs.as_mut())?;
        self.after_step(obs)?;
        Ok(logits)
    }

    /// [`Self::step`] for several sessions on one model at once: `ids[i]` after session `i`.
    /// Sessions whose press keeps the model's forward pass ([`Press::changes_forward`] false)
    /// run their projections together ([`Model::forward_many`]: every weight read once for up to
    /// 16 of them), and each gets the logits its own [`Self::step`] would give, bit for bit; the
    /// others step alone. Returns each session's next-token logits on the host, in order.
    ///
    /// # Errors
    /// As [`Self::step`]; sessions on different models; `ids` and `sessions` of different
    /// lengths.
    pub fn step_many(sessions: &mut [&mut Session<'a, B>], ids: &[u32]) -> Result<Vec<Vec<f32>>> {
        if sessions.len() != ids.len() {
            return Err(Error::Request(format!(
                "step_many: {} tokens for {} sessions",
                ids.len(),
                sessions.len()
            )));
        }
        let Some(model) = sessions.first().map(|s| s.model) else {
            return Ok(Vec::new());
        };
        if sessions.iter().any(|s| !std::ptr::eq(s.model, model)) {
            return Err(Error::Request(
                "step_many: sessions on different models".into(),
            ));
        }
        let mut obs = Vec::with_capacity(sessions.len());
        for s in sessions.iter_mut() {
            obs.push(s.before_step()?);
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; sessions.len()];
        // Together: the sessions on the model's own forward pass.
        let joins: Vec<bool> = sessions
            .iter()
            .map(|s| !s.press.changes_forward())
            .collect();
        let mut caches = Vec::new();
        let mut observers = Vec::new();
        let mut tokens = Vec::new();
        for (((s, o), &id), _) in sessions
            .iter_mut()
            .zip(obs.iter_mut())
            .zip(ids)
            .zip(&joins)
            .filter(|(_, &j)| j)
        {
            caches.push(&mut s.cache);
            observers.push(o.as_mut());
            tokens.push(id);
        }
        if !tokens.is_empty() {
            let logits = model.forward_many(&tokens, &mut caches, &mut observers)?;
            let at = joins.iter().enumerate().filter(|(_, &j)| j).map(|(i, _)| i);
            for (i, l) in at.zip(logits) {
                out[i] = Some(l);
            }
        }
        for (i, (s, o)) in sessions.iter_mut().zip(obs.iter_mut()).enumerate() {
            if out[i].is_none() {
                let logits = s
                    .press
                    .forward(model, &[ids[i]], &mut s.cache, o.as_mut())?;
                out[i] = Some(crate::generate::last_row(logits));
            }
        }
        for (s, o) in sessions.iter_mut().zip(obs) {
            s.after_step(o)?;
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// What [`Self::step`] does before the forward pass: the positions re-assigned when the next
    /// one would pass the context, and the observer of the press's decode hook.
    fn before_step(&mut self) -> Result<Option<Observer>> {
        let context = self.model.config.context_len;
        if self.cache.next_position >= context {
            let model = self.model;
            let rope = model.rope_set_for(self.cache.next_position);
            self.parked(|press, cache| press.reassign_positions(cache, rope))?;
            if self.cache.next_position >= context {
                return Err(Error::Request(format!(
                    "{}: the cache holds {} entries, the model's whole context; nothing to \
                     re-assign",
                    self.press.name(),
                    self.cache.next_position
                )));
            }
        }
        Ok(self.observer(self.press.decode_observe()))
    }

    /// What [`Self::step`] does after the forward pass: the sliding windows moved on and the
    /// press's decode hook run.
    fn after_step(&mut self, obs: Option<Observer>) -> Result<()> {
        windowed::slide(&mut self.cache, &self.model.config.layer_windows);
        self.tokens += 1;
        self.parked(|press, cache| press.after_decode(cache, obs.as_ref()))
    }

    /// Runs `ids` after what the cache holds in one forward call (through the press's forward)
    /// and appends their K/V uncompressed: no compression hook runs, and a press holding a
    /// budget while decoding holds them on top of it ([`Press::appended_uncompressed`]), so
    /// decoding does not evict context to make room for them. Question-agnostic evaluation
    /// appends the question after compressing the context this way. Returns the last
    /// position's logits.
    ///
    /// # Shapes
    /// - ids: `t` tokens → `[1, vocab]`
    pub fn extend(&mut self, ids: &[u32]) -> Result<Tensor<B, 2>> {
        if self.tokens == 0 {
            return Err(Error::Request("extend before the prefill".into()));
        }
        let logits = self.press.forward(self.model, ids, &mut self.cache, None)?;
        windowed::slide(&mut self.cache, &self.model.config.layer_windows);
        self.tokens += ids.len();
        self.press.appended_uncompressed(ids.len());
        Ok(logits)
    }

    /// What the cache holds now, against FullKV.
    pub fn memory(&self) -> MemoryReport {
        let g = &self.model.config.geometry;
        MemoryReport {
            tokens: self.tokens,
            held_bytes: self.press.held_bytes(&self.cache) as u64,
            full_bytes: full_kv_bytes(g, self.tokens, BYTES_PER_ELEMENT),
        }
    }
}

/// What a pressed generation produced and measured.
#[derive(Debug, Clone)]
pub struct PressedRun {
    /// New ids (ending with the stop id when one was produced).
    pub ids: Vec<u32>,
    /// Memory right after the prompt was compressed.
    pub after_prefill: MemoryReport,
    /// Memory after the last decode step.
    pub at_end: MemoryReport,
    /// Seconds of the prefill (forward and press).
    pub prefill_secs: f64,
    /// Seconds of the decode steps (forward and press).
    pub decode_secs: f64,
    /// Decode steps run (new tokens after the first).
    pub decode_steps: usize,
}

/// Generates after `prompt` under `press`, calling `on_token` with each new id.
pub fn generate_pressed<B: Backend>(
    model: &Model<B>,
    prompt: &[u32],
    config: &GenerateConfig,
    press: &mut dyn Press<B>,
    on_token: impl FnMut(u32),
) -> Result<PressedRun> {
    let sampler = Sampler::new(config.sampling)?;
    let mut session = Session::new(model, press);
    let started = Instant::now();
    let logits = session.prefill(prompt)?;
    let prefill_secs = started.elapsed().as_secs_f64();
    let after_prefill = session.memory();
    let started = Instant::now();
    let ids = decode_loop(config, sampler, logits, |id| session.step(id), on_token)?;
    Ok(PressedRun {
        decode_steps: ids.len().saturating_sub(1),
        ids,
        after_prefill,
        at_end: session.memory(),
        prefill_secs,
        decode_secs: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use burn::backend::Flex;

    use super::*;
    use crate::generate::last_row;
    use crate::press::full::FullPress;
    use crate::press::streaming::StreamingScorer;
    use crate::press::{Allocation, SelectionPress};
    use crate::test_model::{tiny_gguf, TinySpec};
    use kvplan_planner::Method;

    /// A tiny model trained (as its metadata says) on a context of 32 tokens.
    fn short_context_model() -> Model<Flex> {
        let g = tiny_gguf(&TinySpec::small(7, 2, 32));
        Model::from_gguf(&g, &Default::default()).expect("tiny model")
    }

    #[test]
    fn an_evicting_stream_goes_past_the_context_with_positions_reassigned() {
        let model = short_context_model();
        let mut press = SelectionPress::new(
            Method::Streaming,
            Box::new(StreamingScorer::new(4)),
            Allocation::Uniform(12),
        );
        let mut s = Session::new(&model, &mut press);
        s.prefill(&(0..20).collect::<Vec<u32>>()).expect("prefill");
        // 20 prompt + 60 streamed tokens: far past the 32 positions RoPE was trained on.
        for i in 0..60u32 {
            s.step(i % 50).expect("step past the context");
            assert!(s.cache.next_position <= 32, "{}", s.cache.next_position);
            for l in &s.cache.layers {
                assert!(l.positions(0).iter().all(|&p| p < 32));
                assert_eq!(l.len(0), 12);
            }
        }
        assert_eq!(s.tokens, 80);
    }

    #[test]
    fn fullkv_stops_at_the_context_with_one_clear_error() {
        let model = short_context_model();
        let mut press = FullPress;
        let mut s = Session::new(&model, &mut press);
        s.prefill(&(0..30).collect::<Vec<u32>>()).expect("prefill");
        s.step(1).expect("position 30");
        s.step(1).expect("position 31");
        let err = s.step(1).expect_err("position 32 is past the context");
        assert!(err.to_string().contains("full"), "{err}");
        assert!(err.to_string().contains("context"), "{err}");
    }

    #[test]
    fn extend_appends_a_question_uncompressed_after_a_compressed_context() {
        // Under FullKV, prefill(context) then extend(question) is the prompt's own forward:
        // the same last logits; under StreamingLLM (budget 12) the context is cut to 12 and the
        // 6 question tokens are appended whole, counted in the bytes: 18 of 26 entries.
        let model = short_context_model();
        let prompt: Vec<u32> = (0..26).map(|i| (i * 7 % 50) as u32).collect();
        let mut full = FullPress;
        let whole = last_row(
            Session::new(&model, &mut full)
                .prefill(&prompt)
                .expect("prefill"),
        );
        let mut full = FullPress;
        let mut s = Session::new(&model, &mut full);
        s.prefill(&prompt[..20]).expect("context");
        let split = last_row(s.extend(&prompt[20..]).expect("question"));
        assert!(whole.iter().zip(&split).all(|(a, b)| (a - b).abs() < 1e-4));
        let mut press = SelectionPress::new(
            Method::Streaming,
            Box::new(StreamingScorer::new(4)),
            Allocation::Uniform(12),
        );
        let mut s = Session::new(&model, &mut press);
        s.prefill(&prompt[..20]).expect("context");
        s.extend(&prompt[20..]).expect("question");
        assert_eq!(s.tokens, 26);
        for l in &s.cache.layers {
            assert_eq!(l.len(0), 18);
        }
        let m = s.memory();
        assert_eq!(m.held_bytes * 26, m.full_bytes * 18);
    }
}
