//! Gadget names against the operator's patterns (`[gadgets]` rules, an
//! agent's `gadgets` list, argument rules): case-insensitive globs, `*`
//! any run of characters, `?` one, matched in linear time.

/// Gadget names against the operator's patterns (`[gadgets]` rules, an
/// agent's `gadgets` list).
/// Case-insensitive glob: `*` any run of characters, `?` one character.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.to_lowercase().chars().collect();
    let name: Vec<char> = name.to_lowercase().chars().collect();
    glob_matches_chars(&pattern, &name)
}

/// The glob match itself, case as given: `*` any run of characters, `?`
/// one.
pub fn glob_matches_chars(pattern: &[char], name: &[char]) -> bool {
    // Iterative matching with one backtrack point: linear in practice and
    // never exponential, whatever the pattern.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == name[n]) {
            p += 1;
            n += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
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
    pattern[p..].iter().all(|&c| c == '*')
}
