//! The `strgen` filter: a random string from a Python StringGenerator pattern (Poolboy 1.12 §5.5),
//! e.g. `[0-9a-f]{8}`, `[a-z]{4}[0-9]{2}`, `[\l\d]{4:18}&[\d]&[\p]`, `(com|net|org)`.
//!
//! Supported: literals (`\` escapes a special character), character classes with ranges and the
//! shorthands `\d \w \l \u \c \p \h \o \s`, groups, `|` alternatives, `&` (concatenate and
//! shuffle), and counts `{n}` / `{n:m}` after a class, group or literal character.

use rand::RngExt;
use rand::seq::{IndexedRandom, SliceRandom};
use thiserror::Error;

/// A pattern StringGenerator would reject too.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid strgen pattern {pattern:?} at character {position}: {reason}")]
pub(super) struct StrgenError {
    pattern: String,
    position: usize,
    reason: &'static str,
}

/// Longest string a pattern may produce: a pattern is user input, this is a guard, not a feature.
const MAX_OUTPUT: usize = 65_536;

enum Node {
    Chars(Vec<char>, usize, usize),
    Literal(char, usize, usize),
    Seq(Vec<Node>),
    Alt(Vec<Node>),
    Shuffle(Vec<Node>),
    Group(Box<Node>, usize, usize),
}

struct Parser<'a> {
    pattern: &'a str,
    chars: Vec<char>,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, reason: &'static str) -> StrgenError {
        StrgenError {
            pattern: self.pattern.to_owned(),
            position: self.pos,
            reason,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn alternatives(&mut self) -> Result<Node, StrgenError> {
        let mut options = vec![self.shuffle()?];
        while self.peek() == Some('|') {
            self.pos += 1;
            options.push(self.shuffle()?);
        }
        Ok(if options.len() == 1 {
            options.remove(0)
        } else {
            Node::Alt(options)
        })
    }

    fn shuffle(&mut self) -> Result<Node, StrgenError> {
        let mut parts = vec![self.sequence()?];
        while self.peek() == Some('&') {
            self.pos += 1;
            parts.push(self.sequence()?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Node::Shuffle(parts)
        })
    }

    fn sequence(&mut self) -> Result<Node, StrgenError> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            let item = match c {
                '|' | '&' | ')' => break,
                '[' => {
                    self.pos += 1;
                    let set = self.class()?;
                    let (min, max) = self.count()?;
                    Node::Chars(set, min, max)
                }
                '(' => {
                    self.pos += 1;
                    let inner = self.alternatives()?;
                    if self.peek() != Some(')') {
                        return Err(self.error("unclosed group"));
                    }
                    self.pos += 1;
                    let (min, max) = self.count()?;
                    Node::Group(Box::new(inner), min, max)
                }
                '{' | '}' | ']' => {
                    return Err(self.error("unexpected special character (escape it with \\)"));
                }
                '\\' => {
                    self.pos += 1;
                    let escaped = self
                        .peek()
                        .ok_or_else(|| self.error("pattern ends with \\"))?;
                    self.pos += 1;
                    match shorthand(escaped) {
                        Some(set) => {
                            let (min, max) = self.count()?;
                            Node::Chars(set, min, max)
                        }
                        None => {
                            let (min, max) = self.count()?;
                            Node::Literal(escaped, min, max)
                        }
                    }
                }
                other => {
                    self.pos += 1;
                    let (min, max) = self.count()?;
                    Node::Literal(other, min, max)
                }
            };
            items.push(item);
        }
        Ok(Node::Seq(items))
    }

    /// The inside of `[...]`, the opening bracket already consumed.
    fn class(&mut self) -> Result<Vec<char>, StrgenError> {
        let mut set = Vec::new();
        loop {
            let c = self
                .peek()
                .ok_or_else(|| self.error("unclosed character class"))?;
            self.pos += 1;
            match c {
                ']' => break,
                '\\' => {
                    let escaped = self
                        .peek()
                        .ok_or_else(|| self.error("pattern ends with \\"))?;
                    self.pos += 1;
                    match shorthand(escaped) {
                        Some(chars) => set.extend(chars),
                        None => set.push(escaped),
                    }
                }
                start => {
                    if self.peek() == Some('-')
                        && self.chars.get(self.pos + 1).is_some_and(|&e| e != ']')
                    {
                        let end = self.chars[self.pos + 1];
                        if end < start {
                            return Err(self.error("character range is reversed"));
                        }
                        self.pos += 2;
                        set.extend(start..=end);
                    } else {
                        set.push(start);
                    }
                }
            }
        }
        if set.is_empty() {
            return Err(self.error("empty character class"));
        }
        set.sort_unstable();
        set.dedup();
        Ok(set)
    }

    /// An optional `{n}` or `{n:m}` (also `{n-m}`, `{n,m}`).
    fn count(&mut self) -> Result<(usize, usize), StrgenError> {
        if self.peek() != Some('{') {
            return Ok((1, 1));
        }
        self.pos += 1;
        let start = self.pos;
        while self.peek().is_some_and(|c| c != '}') {
            self.pos += 1;
        }
        if self.peek() != Some('}') {
            return Err(self.error("unclosed count"));
        }
        let body: String = self.chars[start..self.pos].iter().collect();
        self.pos += 1;
        let number = |s: &str| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| self.error("count must be {n} or {n:m}"))
        };
        let (min, max) = match body.split_once([':', '-', ',']) {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(&body)?;
                (n, n)
            }
        };
        if min > max {
            return Err(self.error("count range is reversed"));
        }
        if max > MAX_OUTPUT {
            return Err(self.error("count is too large"));
        }
        Ok((min, max))
    }
}

fn shorthand(c: char) -> Option<Vec<char>> {
    let digits = '0'..='9';
    let lower = 'a'..='z';
    let upper = 'A'..='Z';
    Some(match c {
        'd' => digits.collect(),
        'w' => digits.chain(lower).chain(upper).chain(['_']).collect(),
        'l' => lower.chain(upper).collect(),
        'u' => upper.collect(),
        'c' => lower.collect(),
        'h' => digits.chain('a'..='f').collect(),
        'o' => ('0'..='7').collect(),
        'p' => "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~".chars().collect(),
        's' => vec![' '],
        _ => return None,
    })
}

fn generate(
    node: &Node,
    rng: &mut impl rand::Rng,
    out: &mut Vec<char>,
) -> Result<(), &'static str> {
    let guard = |out: &Vec<char>| {
        if out.len() > MAX_OUTPUT {
            Err("pattern produces too long a string")
        } else {
            Ok(())
        }
    };
    match node {
        Node::Chars(set, min, max) => {
            for _ in 0..rng.random_range(*min..=*max) {
                out.extend(set.choose(rng));
            }
        }
        Node::Literal(c, min, max) => {
            out.extend(std::iter::repeat_n(*c, rng.random_range(*min..=*max)));
        }
        Node::Seq(items) => {
            for item in items {
                generate(item, rng, out)?;
            }
        }
        Node::Alt(options) => {
            if let Some(option) = options.choose(rng) {
                generate(option, rng, out)?;
            }
        }
        Node::Shuffle(parts) => {
            let mut chars = Vec::new();
            for part in parts {
                generate(part, rng, &mut chars)?;
            }
            chars.shuffle(rng);
            out.extend(chars);
        }
        Node::Group(inner, min, max) => {
            for _ in 0..rng.random_range(*min..=*max) {
                generate(inner, rng, out)?;
                guard(out)?;
            }
        }
    }
    guard(out)
}

/// Renders one random string for `pattern`.
pub(super) fn strgen(pattern: &str) -> Result<String, StrgenError> {
    let mut parser = Parser {
        pattern,
        chars: pattern.chars().collect(),
        pos: 0,
    };
    let tree = parser.alternatives()?;
    if parser.pos != parser.chars.len() {
        return Err(parser.error("unmatched )"));
    }
    let mut out = Vec::new();
    generate(&tree, &mut rand::rng(), &mut out).map_err(|reason| StrgenError {
        pattern: pattern.to_owned(),
        position: 0,
        reason,
    })?;
    Ok(out.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    fn assert_matches(pattern: &str, regex: &str) {
        let re = Regex::new(regex).unwrap();
        for _ in 0..50 {
            let out = strgen(pattern).unwrap();
            assert!(
                re.is_match(&out),
                "{pattern} gave {out:?}, expected {regex}"
            );
        }
    }

    #[test]
    fn classes_counts_and_literals() {
        assert_matches("[0-9a-f]{8}", "^[0-9a-f]{8}$");
        assert_matches("[a-z]{4}[0-9]{2}", "^[a-z]{4}[0-9]{2}$");
        assert_matches("user-[\\d]{3:5}", "^user-[0-9]{3,5}$");
        assert_matches("[\\u\\d]{6}", "^[A-Z0-9]{6}$");
        assert_matches("\\[x\\]", r"^\[x\]$");
        assert_matches("[\\c]{4}.(com|net|org)", r"^[a-z]{4}\.(com|net|org)$");
    }

    #[test]
    fn shuffle_keeps_every_part() {
        for _ in 0..50 {
            let out = strgen("[a-z]{6}&[\\d]{2}").unwrap();
            assert_eq!(out.len(), 8);
            assert_eq!(out.chars().filter(char::is_ascii_digit).count(), 2);
        }
    }

    #[test]
    fn invalid_patterns_are_errors() {
        for bad in [
            "[a-z",
            "[]",
            "[z-a]",
            "(ab",
            "ab)",
            "[a]{x}",
            "[a]{3:1}",
            "a{",
            "\\",
            "[a]{99999999}",
        ] {
            assert!(strgen(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
