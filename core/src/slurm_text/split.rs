//! Comma lists whose entries may hold commas inside brackets.

/// Splits `s` on the commas outside `open`…`close` pairs: hostlists
/// (`a100-[1-2],v100-1`) and GRES strings (`gpu:a100:4(IDX:0,2-3),gpu:v100:2`).
pub fn split_top_level(s: &str, open: char, close: char) -> Vec<&str> {
    let mut entries = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
        } else if c == ',' && depth == 0 {
            entries.push(&s[start..i]);
            start = i + 1;
        }
    }
    entries.push(&s[start..]);
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_split_keeps_bracketed_commas() {
        assert_eq!(split_top_level("a100-[1,3],v100-1", '[', ']'), ["a100-[1,3]", "v100-1"]);
        assert_eq!(split_top_level("gpu:a100:4(IDX:0,2-3),gpu:v100:2", '(', ')'), ["gpu:a100:4(IDX:0,2-3)", "gpu:v100:2"]);
        assert_eq!(split_top_level("", '(', ')'), [""]);
    }
}
