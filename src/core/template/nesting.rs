//! A bound on the length of one expression's operator chain, checked on the tokens before a
//! template is parsed.
//!
//! minijinja parses a chain such as `1 + 1 + … + 1` or `x | f | f | …` in a loop, but compiles,
//! evaluates and drops it by recursion: a few thousand links overflow the stack, which aborts the
//! whole process. Templates come from claims too (`autoDelete.when`, resource templates), so one
//! claim could stop the operator for everyone; such a template is rejected with an error instead.
//! Brackets and nested blocks are already bounded by minijinja's own parser.

use minijinja::machinery::{Token, tokenize};
use minijinja::syntax::SyntaxConfig;
use minijinja::{Error, ErrorKind};

/// Operators, filters, tests, attribute and item lookups and calls allowed in one `{{ }}` or
/// `{% %}` block: far beyond any real template, far below what overflows a 2 MiB stack.
pub(super) const MAX_LINKS: usize = 500;

/// Rejects a source with a block of more than [`MAX_LINKS`] links. A source that does not
/// tokenize is let through: the parser reports its error.
pub(super) fn check(source: &str) -> Result<(), Error> {
    let mut links = 0usize;
    for token in tokenize(source, false, SyntaxConfig::default()) {
        let Ok((token, _)) = token else {
            return Ok(());
        };
        if matches!(token, Token::VariableStart | Token::BlockStart) {
            links = 0;
        } else if is_link(&token) {
            links += 1;
            if links > MAX_LINKS {
                return Err(Error::new(
                    ErrorKind::SyntaxError,
                    format!(
                        "an expression chains more than {MAX_LINKS} operators, filters or \
                         lookups in one block; split it with `{{% set %}}`"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A token that adds one level to the expression tree being built.
fn is_link(token: &Token<'_>) -> bool {
    match token {
        Token::Plus
        | Token::Minus
        | Token::Mul
        | Token::Div
        | Token::FloorDiv
        | Token::Pow
        | Token::Mod
        | Token::Dot
        | Token::Tilde
        | Token::Pipe
        | Token::Eq
        | Token::Ne
        | Token::Gt
        | Token::Gte
        | Token::Lt
        | Token::Lte
        | Token::BracketOpen
        | Token::ParenOpen => true,
        Token::Ident(word) => matches!(*word, "and" | "or" | "not" | "in" | "is" | "if"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(links: usize) -> String {
        format!("{{{{ {}1 }}}}", "1 + ".repeat(links))
    }

    #[test]
    fn a_chain_up_to_the_limit_passes() {
        assert!(check(&chain(MAX_LINKS)).is_ok());
    }

    #[test]
    fn a_longer_chain_is_refused() {
        let error = check(&chain(MAX_LINKS + 1)).unwrap_err();
        assert!(
            error.to_string().contains("more than 500 operators"),
            "{error}"
        );
    }

    #[test]
    fn every_kind_of_link_counts() {
        for link in [
            " | lower",
            ".a",
            "[0]",
            "()",
            " ~ 'x'",
            " and x",
            " is defined",
        ] {
            let source = format!("{{{{ x{} }}}}", link.repeat(MAX_LINKS + 1));
            assert!(check(&source).is_err(), "{link}");
        }
    }

    #[test]
    fn the_count_starts_again_in_each_block_and_ignores_text() {
        let blocks = format!("{}{}", chain(MAX_LINKS), chain(MAX_LINKS));
        assert!(check(&blocks).is_ok());
        let text = format!("{} {}", "a + ".repeat(MAX_LINKS * 2), chain(3));
        assert!(check(&text).is_ok());
    }

    #[test]
    fn flat_literals_are_not_links() {
        let items: Vec<String> = (0..2 * MAX_LINKS).map(|i| format!("'k{i}': {i}")).collect();
        assert!(check(&format!("{{{{ {{{}}} }}}}", items.join(", "))).is_ok());
    }
}
