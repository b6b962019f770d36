//! Scanning JSON text without parsing it: where a value, a string or the whitespace before
//! them ends. A string, object or array cut by the end of the text is `None`, so a caller
//! reading a stream can wait for more; a number or literal runs to the end of the text, and
//! such a caller checks that something follows it.

/// Just past the whitespace at `at`.
pub(super) fn skip_whitespace(text: &[u8], mut at: usize) -> usize {
    while text.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// Just past the string whose quote is at `at`.
pub(super) fn skip_string(text: &[u8], at: usize) -> Option<usize> {
    let mut at = at + 1;
    loop {
        match text.get(at)? {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
}

/// Just past the value that starts at `at`.
pub(super) fn skip_value(text: &[u8], at: usize) -> Option<usize> {
    match text.get(at)? {
        b'"' => skip_string(text, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = at;
            loop {
                match text.get(at)? {
                    b'"' => at = skip_string(text, at)?,
                    b'{' | b'[' => {
                        depth += 1;
                        at += 1;
                    }
                    b'}' | b']' => {
                        depth -= 1;
                        at += 1;
                        if depth == 0 {
                            return Some(at);
                        }
                    }
                    _ => at += 1,
                }
            }
        }
        _ => {
            let mut at = at;
            while text
                .get(at)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
            {
                at += 1;
            }
            Some(at)
        }
    }
}
