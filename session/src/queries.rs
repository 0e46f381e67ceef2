//! Terminal queries taken out of a replay.
//!
//! A program asks the terminal things by printing a query: where the cursor is (`CSI 6 n`, which
//! BusyBox's line editor prints at every prompt), what terminal it is (`CSI c`), a mode's state
//! (`CSI ? Ps $ p`), its colours (`OSC 11 ; ? ST`), a capability (`DCS + q … ST`). The terminal
//! answers by typing the answer, as if the user had. Replayed to a terminal that attaches later,
//! the old queries are answered again, and the answers land in the shell as keystrokes: on the
//! real node, `^[[21;5R^[[23;5R` appeared in the middle of a loop's output after a page
//! reattached. So a replay carries no query; what was printed around them is kept byte for byte.
//!
//! Hand-written rather than with a parser crate (`vte`): a parser gives actions, not the spans
//! of bytes they came from, and a replay must be the session's own bytes minus the queries, not
//! a re-encoding of what a parser understood. The grammar needed is ECMA-48's outline of a
//! sequence (its introducer, parameter, intermediate and final bytes, or a string ended by ST
//! or BEL), which is all this reads.

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;

/// `bytes` without the terminal queries in them. A sequence cut off at the end is kept (it is
/// not known to be a query).
pub fn without_queries(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = rest.iter().position(|&b| b == ESC) {
        out.extend_from_slice(&rest[..at]);
        rest = &rest[at..];
        match query_len(rest) {
            Some(len) => rest = &rest[len..],
            None => {
                out.push(ESC);
                rest = &rest[1..];
            }
        }
    }
    out.extend_from_slice(rest);
    out
}

/// The length of the query `s` starts with (`s[0]` is ESC), if it is one.
fn query_len(s: &[u8]) -> Option<usize> {
    match s.get(1)? {
        b'[' => csi_query(s),
        b']' => string_query(s, |body| body.split(|&b| b == b';').skip(1).any(|part| part == b"?")),
        b'P' => string_query(s, |body| body.starts_with(b"$q") || body.starts_with(b"+q")),
        _ => None,
    }
}

/// A control sequence (`ESC [` parameters, intermediates, a final byte) that asks for an
/// answer: device status and cursor position (`n`), device attributes (`c`), a mode's state
/// (`$ p`), window reports (`t` 11, 13–16, 18–21), the terminal's version (`> q`), the keyboard
/// protocol (`? u`).
fn csi_query(s: &[u8]) -> Option<usize> {
    let mut i = 2;
    let params_start = i;
    while (0x30..=0x3f).contains(s.get(i)?) {
        i += 1;
    }
    let params = &s[params_start..i];
    let intermediates_start = i;
    while (0x20..=0x2f).contains(s.get(i)?) {
        i += 1;
    }
    let intermediates = &s[intermediates_start..i];
    let last = *s.get(i)?;
    if !(0x40..=0x7e).contains(&last) {
        return None;
    }
    let marker = params.first().copied().filter(|b| b"<=>?".contains(b));
    let first_number = || {
        let digits = params.iter().skip(usize::from(marker.is_some())).take_while(|b| b.is_ascii_digit());
        digits.fold(0u32, |n, b| n.saturating_mul(10).saturating_add(u32::from(b - b'0')))
    };
    let query = match (last, intermediates, marker) {
        (b'n' | b'c', b"", _) => true,
        (b'p', b"$", _) => true,
        (b't', b"", None) => matches!(first_number(), 11 | 13..=16 | 18..=21),
        (b'q', b"", Some(b'>')) => true,
        (b'u', b"", Some(b'?')) => true,
        _ => false,
    };
    query.then_some(i + 1)
}

/// A string sequence (OSC `ESC ]`, DCS `ESC P`) ended by ST (`ESC \`) or BEL, whose body
/// `is_query` says asks for an answer.
fn string_query(s: &[u8], is_query: impl Fn(&[u8]) -> bool) -> Option<usize> {
    let body = &s[2..];
    let (end, terminator) = body.iter().enumerate().find_map(|(i, &b)| match b {
        BEL => Some((i, 1)),
        ESC if body.get(i + 1) == Some(&b'\\') => Some((i, 2)),
        _ => None,
    })?;
    is_query(&body[..end]).then_some(2 + end + terminator)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_go_and_everything_else_stays() {
        let cases: [(&str, &[u8], &[u8]); 16] = [
            ("plain output", b"line-1\r\nline-2\r\n", b"line-1\r\nline-2\r\n"),
            ("busybox's cursor query at a prompt", b"~ $ \x1b[6n", b"~ $ "),
            ("a status query", b"a\x1b[5nb", b"ab"),
            ("device attributes, primary and secondary", b"\x1b[c\x1b[0c\x1b[>c\x1b[=0cx", b"x"),
            ("a mode's state", b"\x1b[?2004$pok", b"ok"),
            ("window size reports", b"\x1b[18t\x1b[14t\x1b[21t.", b"."),
            ("window operations that are no queries stay", b"\x1b[8;24;80t\x1b[22;0t", b"\x1b[8;24;80t\x1b[22;0t"),
            ("the terminal's version, the keyboard protocol", b"\x1b[>q\x1b[?u!", b"!"),
            (
                "colours and style stay",
                b"\x1b[1;31mred\x1b[0m \x1b[?25h\x1b[2J\x1b[H",
                b"\x1b[1;31mred\x1b[0m \x1b[?25h\x1b[2J\x1b[H",
            ),
            ("a colour query, ended by BEL or ST", b"\x1b]11;?\x07\x1b]4;1;?\x1b\\z", b"z"),
            ("a title stays", b"\x1b]0;my shell\x07$ ", b"\x1b]0;my shell\x07$ "),
            ("capability and setting queries", b"\x1bP+q544e\x1b\\\x1bP$qm\x1b\\y", b"y"),
            ("a sequence cut off at the end stays", b"done\x1b[6", b"done\x1b[6"),
            ("an unterminated string stays", b"\x1b]11;?", b"\x1b]11;?"),
            ("a lone escape stays", b"a\x1bb", b"a\x1bb"),
            ("UTF-8 passes through", "é\x1b[6nü".as_bytes(), "éü".as_bytes()),
        ];
        for (what, input, want) in cases {
            assert_eq!(without_queries(input), want, "{what}");
        }
    }
}
