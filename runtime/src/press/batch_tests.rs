//! Decode steps taken together ([`Session::step_many`]) give every press the logits, the cache
//! and the bytes its own [`Session::step`] gives, bit for bit: sessions at different positions,
//! presses that evict while decoding (StreamingLLM, H2O, TOVA, TreeKV), presses observed while
//! decoding (H2O, TOVA) and presses with their own forward pass (SpindleKV, PoD: they step
//! alone) in one batch.

use super::tests::{prompt, registry_presses, tiny_plan, B, D, L, NH, NKV};
use super::*;

/// The presses' tiny model (2 layers, 4 query heads on 2 KV heads) with its projections and
/// embedding stored as `Q8_0` blocks (the feed-forward widened to 64, a whole number of blocks):
/// the CPU backend holds them as blocks, as it holds a real GGUF's, and takes its fused kernels.
fn tiny_q8_model() -> Model<B> {
    let spec = crate::test_model::TinySpec {
        seed: 99,
        layers: L,
        heads: NH,
        kv_heads: NKV,
        head_dim: D,
        hidden: 32,
        ffn: 64,
        vocab: 50,
        ctx: 256,
        qk_scale: 0.6,
        random_norms: true,
    };
    let g = crate::test_model::as_q8_0(&crate::test_model::tiny_gguf(&spec));
    Model::from_gguf(&g, &Default::default()).expect("tiny Q8_0 model")
}

/// Per session: the logits of every step and the bytes held after it.
type Trace = Vec<(Vec<Vec<f32>>, Vec<u64>)>;

/// Every registry press at budget 10 on the tiny model, session `i` after the first `40 − i`
/// tokens of one prompt, then 14 teacher-forced decode steps (the same token for every session
/// at a step), together or each alone.
fn trace(together: bool) -> Trace {
    let model = tiny_q8_model();
    let plan = tiny_plan();
    let n = 40;
    let ids = prompt(n);
    let alloc = Allocation::Uniform(10);
    let mut presses = registry_presses(&plan, &model, &alloc, n);
    assert!(presses.len() >= 10, "every method of the table");
    let mut sessions: Vec<Session<'_, B>> = presses
        .iter_mut()
        .map(|(_, p)| Session::new(&model, p.as_mut()))
        .collect();
    let mut out: Trace = vec![(Vec::new(), Vec::new()); sessions.len()];
    for (i, s) in sessions.iter_mut().enumerate() {
        s.prefill(&ids[..n - i]).expect("prefill");
    }
    for step in 0..14 {
        let tokens: Vec<u32> = (0..sessions.len())
            .map(|i| ((7 * step + 3 * i) % 50) as u32)
            .collect();
        let logits: Vec<Vec<f32>> = if together {
            let mut refs: Vec<&mut Session<'_, B>> = sessions.iter_mut().collect();
            Session::step_many(&mut refs, &tokens).expect("step_many")
        } else {
            sessions
                .iter_mut()
                .zip(&tokens)
                .map(|(s, &t)| crate::generate::last_row(s.step(t).expect("step")))
                .collect()
        };
        for ((o, l), s) in out.iter_mut().zip(logits).zip(&sessions) {
            o.0.push(l);
            o.1.push(s.memory().held_bytes);
        }
    }
    out
}

#[test]
fn stepping_together_gives_each_press_its_own_numbers() {
    let model = tiny_q8_model();
    assert!(
        model.forward_many_is_exact(),
        "the tiny model runs on the host kernel with every projection held as blocks"
    );
    let (alone, together) = (trace(false), trace(true));
    assert_eq!(alone.len(), together.len());
    for (i, (a, t)) in alone.iter().zip(&together).enumerate() {
        assert_eq!(a.1, t.1, "session {i}: bytes held after each step");
        for (step, (x, y)) in a.0.iter().zip(&t.0).enumerate() {
            let same =
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits());
            assert!(same, "session {i}, step {step}: logits differ");
        }
    }
}

#[test]
fn a_batch_is_refused_for_tokens_and_sessions_of_different_counts() {
    let model = tiny_q8_model();
    let mut press = full::FullPress;
    let mut s = Session::new(&model, &mut press);
    s.prefill(&prompt(5)).expect("prefill");
    let mut refs = vec![&mut s];
    let err = Session::step_many(&mut refs, &[1, 2]).unwrap_err();
    assert!(err.to_string().contains("2 tokens for 1 sessions"), "{err}");
}

#[test]
fn forward_many_runs_each_sequence_at_its_own_position() {
    // Three caches after prompts of 3, 5 and 8 tokens; one token each, together, against the
    // same token run alone: the logits bit for bit, and each cache one position further.
    let model = tiny_q8_model();
    let ids = prompt(8);
    let lens = [3, 5, 8];
    let fill = || -> Vec<_> {
        lens.iter()
            .map(|&n| {
                let mut c = model.new_cache();
                model
                    .forward(&ids[..n], &mut c, None, crate::model::Logits::Last)
                    .expect("prefill");
                c
            })
            .collect()
    };
    let (mut alone, mut together) = (fill(), fill());
    let tokens = [4, 9, 4];
    let want: Vec<Vec<f32>> = alone
        .iter_mut()
        .zip(tokens)
        .map(|(c, t)| {
            let l = model.forward(&[t], c, None, crate::model::Logits::Last);
            crate::generate::last_row(l.expect("step"))
        })
        .collect();
    let mut refs: Vec<_> = together.iter_mut().collect();
    let got = model
        .forward_many(&tokens, &mut refs, &mut [])
        .expect("forward_many");
    assert_eq!(got, want);
    let positions: Vec<usize> = together.iter().map(|c| c.next_position).collect();
    assert_eq!(positions, [4, 6, 9]);
}
