//! What RULER's needle tasks draw and hide needles in (`data/synthetic/niah.py`, task arguments
//! of `synthetic.yaml`): the kinds of keys and values (`type_needle_k`, `type_needle_v`:
//! adjective-noun words, 7-digit numbers, UUIDs) and the haystacks other than the essays
//! (`type_haystack`): `repeat`, one fixed five-sentence line repeated, and `needle`, lines that
//! are themselves needles of other keys. In both, RULER inserts the needles at distinct line
//! indices drawn from `0..n` (descending, so each lands before the line it was drawn at) and
//! joins the lines with newlines; so does [`lines`].
//!
//! Differences from RULER: words come from the 24 × 24 adjective-noun list of
//! [`crate::tasks::niah`] (the `wonderwords` lists are not shipped), so a `needle` haystack's
//! distractor keys are drawn until they differ from the example's own keys, which RULER's far
//! larger list makes all but certain without a check; UUIDs are version-4 UUIDs of 128 bits of
//! our generator, as `uuid.UUID(int=getrandbits(128), version=4)` sets the version and variant
//! bits.

use crate::rng::Rng;
use crate::tasks::niah::{ADJECTIVES, NOUNS};

/// RULER's `repeat` haystack line.
pub const REPEAT: &str =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

/// The haystack of a needle task (`type_haystack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Haystack {
    /// The first `n` words of the Paul Graham essays, needles between sentences.
    Essay,
    /// [`REPEAT`] `n` times, one line each.
    Repeat,
    /// `n` needles of other keys, one line each.
    Needle,
}

/// What a key or a value is (`type_needle_k`, `type_needle_v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An adjective-noun pair, `calm-harbor`.
    Words,
    /// A 7-digit number.
    Numbers,
    /// A version-4 UUID.
    Uuids,
}

impl Kind {
    /// RULER's name of the kind, plural as the needle sentence uses it.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Words => "words",
            Kind::Numbers => "numbers",
            Kind::Uuids => "uuids",
        }
    }

    /// The name with its last letter dropped, as RULER's singular template has it.
    pub fn singular(self) -> &'static str {
        let p = self.plural();
        &p[..p.len() - 1]
    }

    /// One random key or value of this kind (`generate_random`).
    pub fn draw(self, rng: &mut Rng) -> String {
        match self {
            Kind::Words => random_word(rng),
            Kind::Numbers => rng.int_in(1_000_000, 9_999_999).to_string(),
            Kind::Uuids => random_uuid(rng),
        }
    }
}

/// An adjective-noun pair (adjective drawn first).
pub fn random_word(rng: &mut Rng) -> String {
    let adj = ADJECTIVES[rng.below(ADJECTIVES.len() as u64) as usize];
    let noun = NOUNS[rng.below(NOUNS.len() as u64) as usize];
    format!("{adj}-{noun}")
}

/// A version-4 UUID, lower-case hex `8-4-4-4-12`, from 128 random bits with the version nibble
/// set to 4 and the variant bits to `10`.
pub fn random_uuid(rng: &mut Rng) -> String {
    let hi = (rng.next_u64() & !0xF000) | 0x4000;
    let lo = (rng.next_u64() & !(0b11 << 62)) | (0b10 << 62);
    let v = (u128::from(hi) << 64) | u128::from(lo);
    let h = format!("{v:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// The context of a line haystack: `filler` (the `n` lines), the `needles` inserted at distinct
/// indices drawn from `0..n`, joined by newlines. `n` must be at least the number of needles.
pub fn lines(mut filler: Vec<String>, needles: &[String], rng: &mut Rng) -> String {
    let n = filler.len();
    let mut at = rng.sample_indices(n, needles.len());
    at.sort_unstable_by(|a, b| b.cmp(a));
    for (i, needle) in at.into_iter().zip(needles) {
        filler.insert(i, needle.clone());
    }
    filler.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4_lower_hex_and_differ() {
        let mut rng = Rng::new(5);
        let a = random_uuid(&mut rng);
        let b = random_uuid(&mut rng);
        assert_ne!(a, b);
        for u in [&a, &b] {
            let parts: Vec<&str> = u.split('-').collect();
            let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
            assert_eq!(lens, [8, 4, 4, 4, 12], "{u}");
            assert!(u
                .chars()
                .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c)));
            assert!(parts[2].starts_with('4'), "version 4: {u}");
            assert!(
                matches!(parts[3].chars().next(), Some('8' | '9' | 'a' | 'b')),
                "variant 10: {u}"
            );
        }
    }

    #[test]
    fn kinds_name_themselves_as_ruler_does() {
        assert_eq!(Kind::Numbers.plural(), "numbers");
        assert_eq!(Kind::Uuids.singular(), "uuid");
        assert_eq!(Kind::Numbers.draw(&mut Rng::new(1)).len(), 7);
        assert!(Kind::Words.draw(&mut Rng::new(1)).contains('-'));
    }

    #[test]
    fn needles_go_between_lines_each_once() {
        let filler = vec![REPEAT.to_string(); 5];
        let needles = vec!["N1".to_string(), "N2".to_string()];
        let text = lines(filler, &needles, &mut Rng::new(3));
        let got: Vec<&str> = text.split('\n').collect();
        assert_eq!(got.len(), 7);
        assert_eq!(got.iter().filter(|l| **l == REPEAT).count(), 5);
        assert_eq!(got.iter().filter(|l| l.starts_with('N')).count(), 2);
    }
}
