//! Gadget names against the operator's patterns (`[gadgets]` rules, an
//! agent's `gadgets` list, argument rules): case-insensitive globs, `*`
//! any run of characters, `?` one, matched in linear time.

/// Gadget names against the operator's patterns (`[gadgets]` rules, an
/// agent's `gadgets` list).
/// Case-insensitive glob: `*` any run of characters, `?` one character.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    // Names and patterns are ASCII almost always: matched in place, byte
    // by byte, without lowering either into a new buffer (rules are tried
    // on every call).
    if pattern.is_ascii() && name.is_ascii() {
        let lower = |b: &u8| b.to_ascii_lowercase();
        let pattern: &[u8] = pattern.as_bytes();
        return glob_matches_by(
            pattern,
            name.as_bytes(),
            |p, n| lower(p) == lower(n),
            b'*',
            b'?',
        );
    }
    let pattern: Vec<char> = pattern.to_lowercase().chars().collect();
    let name: Vec<char> = name.to_lowercase().chars().collect();
    glob_matches_chars(&pattern, &name)
}

/// The glob match itself, case as given: `*` any run of characters, `?`
/// one.
pub fn glob_matches_chars(pattern: &[char], name: &[char]) -> bool {
    glob_matches_by(pattern, name, |p, n| p == n, '*', '?')
}

/// The one matcher, over any units compared by `same`.
fn glob_matches_by<T: Copy + PartialEq>(
    pattern: &[T],
    name: &[T],
    same: impl Fn(&T, &T) -> bool,
    any_run: T,
    any_one: T,
) -> bool {
    // Iterative matching with one backtrack point: linear in practice and
    // never exponential, whatever the pattern.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len()
            && pattern[p] != any_run
            && (pattern[p] == any_one || same(&pattern[p], &name[n]))
        {
            p += 1;
            n += 1;
        } else if p < pattern.len() && pattern[p] == any_run {
            star = Some((p, n));
            p += 1;
        } else if let Some((star_p, star_n)) = star {
            p = star_p + 1;
            n = star_n + 1;
            star = Some((star_p, star_n + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == any_run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_case_insensitively_in_either_alphabet() {
        assert!(glob_matches("Calc*", "calculator"));
        assert!(glob_matches("*STATS", "TextStats"));
        assert!(glob_matches("json?uery", "JsonQuery"));
        assert!(glob_matches("*a*b*c*", "xxAxxBxxCxx"));
        assert!(!glob_matches("Calc", "Calculator"));
        assert!(!glob_matches("*x", "Calculator"));
        assert!(!glob_matches("*a*b*c*d", &"ab".repeat(5000)));
        // Outside ASCII, by characters, not bytes.
        assert!(glob_matches("Über?", "übers"));
        assert!(glob_matches("caf?", "café"));
        assert!(!glob_matches("caf??", "café"));
    }

    /// Fuzz target: the in-place ASCII matcher agrees with the matcher
    /// over lowered characters on any pattern and name.
    #[test]
    fn fuzz_the_ascii_matcher_agrees_with_the_general_one() {
        let seeds: &[&[u8]] = &[b"Calc*\0calculator", b"*a?b*\0xAyBz", b"**?\0", b"a*\0*a"];
        let runs = crate::fuzz::run("glob", seeds, |input| {
            let text = String::from_utf8_lossy(input);
            let (pattern, name) = text.split_once('\0').unwrap_or((&text, ""));
            if !(pattern.is_ascii() && name.is_ascii()) {
                return;
            }
            let lowered = |s: &str| s.to_lowercase().chars().collect::<Vec<char>>();
            assert_eq!(
                glob_matches(pattern, name),
                glob_matches_chars(&lowered(pattern), &lowered(name)),
                "{pattern:?} {name:?}"
            );
        });
        assert!(runs > 0);
    }
}
