//! Every press on the shipped model, from a plan, on a needle prompt about four times longer
//! than the budget (≈ 550 tokens, 128 entries per head): each method really compresses (the
//! bytes held are the plan's figure, a quarter of FullKV's), the methods that select by the
//! prompt's last rows (SnapKV, PyramidKV, HeadKV) still answer the needle, StreamingLLM (whose
//! window cannot see it) does not, and the memory held shrinks with the budget. SpindleKV holds
//! less than its eviction alone; PoD holds exactly its plan's keys + values (the model is not
//! post-trained for PoD, so its answer is only reported).
//!
//! The plan is built from the hand-made SmolLM2 profile (`planner/tests/fixtures`), so the test
//! does not depend on a profiling run. One prefill is shared: it records what every press asks
//! (the last 8 rows and the column sums), and each press is applied to a copy of its cache.

mod common;

use std::path::PathBuf;

use kvplan_planner::{build_plan, Method, PlanOptions, Profile, Target};
use kvplan_runtime::cache::KvCache;
use kvplan_runtime::generate::argmax;
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::identity::model_identity;
use kvplan_runtime::model::{Logits, Model};
use kvplan_runtime::observe::{ObserveConfig, Observer};
use kvplan_runtime::press::{build_press, Session, PRESS_NAMES};
use kvplan_runtime::tokenizer::Tokenizer;

type B = kvplan_runtime::backend::Selected;

/// Ordinary prose (written for this test) with one fact in it, at about a third of the way.
const PARAGRAPHS: [&str; 5] = [
    "The village of Harrowby sits where two rivers meet, and for most of its history it was known for nothing more than its mills. In the early mornings the millers opened the sluices, and the wheels turned slowly while the fog lifted from the water. Children walked along the towpath to the school house, counting the barges that carried grain and timber down to the coast. The schoolmaster, a patient man with a grey beard, taught them arithmetic by asking how many sacks of flour a barge could hold, and geography by pointing to the places the barges were going.",
    "In the autumn the fields around the village turned brown and gold. Farmers brought their harvest to the market square, where stalls sold apples, pears, honey and cheese. Travellers who passed through often remarked that the market was larger than one would expect for a village of its size, and that the bread was the best they had tasted on the whole road. The baker, whose family had kept the same oven for four generations, never revealed the recipe, although many people asked.",
    "Winter was hard. The rivers sometimes froze at the edges, and the mill wheels stood still for weeks at a time. Families gathered in the evenings around their fires and told stories of floods and storms, of the year the bridge was swept away and of the summer when it did not rain for three months. The old church bell rang every hour, and its sound carried across the frozen meadows as far as the next village.",
    "Spring brought the river back to life. Swallows returned to the eaves of the mill houses, and the meadows filled with flowers. The village held a fair at the end of April, with music, dancing and a race of small boats down the river. The winner of the race received a silver cup that was kept in the church for the rest of the year, and the name of the winning family was carved on a wooden board beside the door.",
    "The secret code for the blue door is 7249.",
];
const QUESTION: &str = "What is the secret code for the blue door? Answer with the number.";
const ANSWER: &str = "7249";

fn needle_prompt() -> String {
    let p = PARAGRAPHS;
    let body = [p[0], p[1], p[4], p[2], p[3], p[1]].join("\n");
    format!("{body}\n\n{QUESTION}")
}

/// Greedy continuation of a session, up to `max` tokens or a stop id.
fn answer(session: &mut Session<'_, B>, first: &[f32], tok: &Tokenizer, max: usize) -> String {
    let mut ids = vec![argmax(first)];
    while ids.len() < max && !tok.stop_ids.contains(ids.last().expect("an id")) {
        let logits = session
            .step(*ids.last().expect("an id"))
            .expect("decode step");
        ids.push(argmax(
            &logits.into_data().iter::<f32>().collect::<Vec<_>>(),
        ));
    }
    ids.retain(|i| !tok.stop_ids.contains(i));
    tok.decode(&ids).expect("decodes")
}

/// The shipped model's file, its tokenizer and the model on the default device.
fn shipped() -> (PathBuf, Tokenizer, Model<B>) {
    let path = common::shipped_model();
    let gguf = GgufFile::open(&path).expect("model opens");
    let tok = Tokenizer::from_gguf(&gguf).expect("tokenizer");
    let model = Model::<B>::from_gguf(&gguf, &kvplan_runtime::backend::device()).expect("model");
    (path, tok, model)
}

/// The hand-made SmolLM2 profile of the planner's tests.
fn handmade_profile() -> Profile {
    Profile::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("planner/tests/fixtures/smollm2-handmade.profile.json"),
    )
    .expect("hand-made profile")
}

/// The one prefill every press shares: the cache, what it recorded of every layer (the last 8
/// attention rows and the column sums every press asks for) and the last position's logits.
fn shared_prefill(model: &Model<B>, prompt: &[u32]) -> (KvCache<B>, Observer, Vec<f32>) {
    let mut cache: KvCache<B> = model.new_cache();
    let obs_config = ObserveConfig {
        attn_rows: 8,
        column_sums: true,
        ..Default::default()
    };
    let mut obs = Observer::new(obs_config, model.config.geometry.layers);
    let logits = model
        .forward(prompt, &mut cache, Some(&mut obs), Logits::Last)
        .expect("prefill");
    (cache, obs, logits.into_data().iter::<f32>().collect())
}

#[test]
fn every_method_compresses_and_selection_methods_keep_the_needle() {
    let (path, tok, model) = shipped();
    let profile = handmade_profile();
    let methods = Method::ALL.to_vec();
    let plan = build_plan(
        &profile,
        &methods,
        Target::Tokens(128),
        &PlanOptions::default(),
    )
    .expect("plan");
    plan.check_model(&model_identity(&path, &model.config).expect("identity"))
        .expect("the plan is for the shipped model");

    let prompt = tok.encode_chat(&needle_prompt()).expect("encodes");
    let n = prompt.len();
    assert!((450..700).contains(&n), "prompt of {n} tokens");
    let (cache, obs, first) = shared_prefill(&model, &prompt);

    let mut report = Vec::new();
    for &name in PRESS_NAMES {
        let mut spec = build_press::<B>(name, Some(&plan), n, None, &model.config)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut session = Session::new(&model, spec.press.as_mut());
        // PoD runs its own attention from the first token (prefill included); the others
        // press the shared prefill.
        let first = if name == "pod" {
            let logits = session.prefill(&prompt).expect("pod prefill");
            logits.into_data().iter::<f32>().collect()
        } else {
            session
                .adopt(cache.clone(), n, Some(&obs))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            first.clone()
        };
        let mem = session.memory();
        if name == "spindle" {
            // SpindleKV's GQA repeat (the default on GQA models) unfolds each KV head into its
            // query heads' copies, each holding the layer's budget; the codebook then holds less
            // than that eviction alone would (the plan's estimate × the group).
            let g = &model.config.geometry;
            let group = (g.q_heads / g.kv_heads) as u64;
            let planned = spec.budgets.as_ref().expect("budgets").kv_bytes(64, 4) * group;
            assert!(
                mem.held_bytes < planned,
                "{name}: {} vs {planned}",
                mem.held_bytes
            );
        } else if name == "pod" {
            // Values everywhere, distant keys once per block: the plan's keys + values figure.
            let b = spec.budgets.as_ref().expect("budgets");
            assert_eq!(
                mem.held_bytes,
                b.kv_bytes(64, 4),
                "{name}: bytes vs the plan"
            );
            assert!(mem.ratio() < 0.9, "{name}: ratio {}", mem.ratio());
        } else if let Some(b) = &spec.budgets {
            // Eviction methods hold exactly the plan's bytes, and far less than FullKV.
            assert_eq!(
                mem.held_bytes,
                b.kv_bytes(model.config.geometry.head_dim, 4),
                "{name}: bytes held vs the plan"
            );
            assert!(mem.ratio() < 0.3, "{name}: ratio {}", mem.ratio());
        } else {
            assert_eq!(mem.held_bytes, mem.full_bytes, "full keeps everything");
        }
        let text = answer(&mut session, &first, &tok, 14);
        report.push(format!("{name}: ratio {:.3}, answer {text:?}", mem.ratio()));
        let expect_needle = ["full", "snapkv", "pyramid", "headkv", "headkv-r"];
        if expect_needle.contains(&name) {
            assert!(text.contains(ANSWER), "{name} lost the needle: {text:?}");
        }
        if name == "streaming" {
            assert!(
                !text.contains(ANSWER),
                "streaming cannot see the needle: {text:?}"
            );
        }
    }
    eprintln!("{}", report.join("\n"));

    // Memory shrinks with the budget (SnapKV and TreeKV re-targeted through the plan).
    for name in ["snapkv", "treekv", "h2o"] {
        let held: Vec<u64> = [256, 128, 64]
            .into_iter()
            .map(|b| {
                let mut spec =
                    build_press::<B>(name, Some(&plan), n, Some(Target::Tokens(b)), &model.config)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                let mut s = Session::new(&model, spec.press.as_mut());
                s.adopt(cache.clone(), n, Some(&obs)).expect("press");
                s.memory().held_bytes
            })
            .collect();
        assert!(held[0] > held[1] && held[1] > held[2], "{name}: {held:?}");
        // 64 entries × 2 × 64 dims × 4 bytes × 30 layers × 3 KV heads.
        assert_eq!(held[2], 64 * 2 * 64 * 4 * 30 * 3, "{name}");
    }
}

/// Benchmark, not a test (`cargo test --test press_smollm2 -- --ignored --nocapture`): decode
/// tokens/s after a 4096-token prompt, FullKV against every method at 12% KV (ratio 0.12 of the
/// plan), one shared prefill.
#[test]
#[ignore]
fn bench_decode_at_4k() {
    let (_, tok, model) = shipped();
    let profile = handmade_profile();
    let plan = build_plan(
        &profile,
        &Method::ALL,
        Target::Ratio(0.12),
        &PlanOptions::default(),
    )
    .expect("plan");
    let unit = tok.encode(&PARAGRAPHS[..4].join("\n")).expect("encodes");
    let n = 4096;
    let prompt: Vec<u32> = unit.iter().copied().cycle().take(n).collect();
    let t = std::time::Instant::now();
    let (cache, obs, _) = shared_prefill(&model, &prompt);
    eprintln!("prefill {n} tokens: {:.1}s", t.elapsed().as_secs_f64());
    let steps = 16;
    for &name in PRESS_NAMES {
        let mut spec = build_press::<B>(name, Some(&plan), n, None, &model.config)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut s = Session::new(&model, spec.press.as_mut());
        let t = std::time::Instant::now();
        s.adopt(cache.clone(), n, Some(&obs)).expect("press");
        let press_s = t.elapsed().as_secs_f64();
        let mem = s.memory();
        let t = std::time::Instant::now();
        for _ in 0..steps {
            s.step(42).expect("step");
        }
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "{name:>9}: KV {:>9} bytes, ratio {:.4}; press {:.2}s; decode {:.2} tokens/s",
            mem.held_bytes,
            mem.ratio(),
            press_s,
            steps as f64 / secs
        );
    }
}

/// Benchmark, not a test (`cargo test --release --test press_smollm2 bench_pod_prefill --
/// --ignored --nocapture`): prefill of a 4096-token prompt under FullKV and under PoD with the
/// committed plan's blocks, side by side (best of two each), and their ratio.
#[test]
#[ignore]
fn bench_pod_prefill_at_4k() {
    let (_, tok, model) = shipped();
    let plan_path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("plans/smollm2-135m-instruct.plan.json");
    let plan = kvplan_planner::Plan::load(&plan_path, None).expect("committed plan");
    let unit = tok.encode(&PARAGRAPHS[..4].join("\n")).expect("encodes");
    let n = 4096;
    let prompt: Vec<u32> = unit.iter().copied().cycle().take(n).collect();
    let mut best = [f64::INFINITY; 2];
    for _ in 0..2 {
        for (i, name) in ["full", "pod"].into_iter().enumerate() {
            let mut spec = build_press::<B>(name, Some(&plan), n, None, &model.config)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut s = Session::new(&model, spec.press.as_mut());
            let t = std::time::Instant::now();
            let _ = s.prefill(&prompt).expect("prefill").into_data();
            best[i] = best[i].min(t.elapsed().as_secs_f64());
        }
    }
    eprintln!(
        "prefill {n} tokens: full {:.2}s, pod {:.2}s, pod/full {:.2}",
        best[0],
        best[1],
        best[1] / best[0]
    );
}
